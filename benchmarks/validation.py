"""The time model against measured training runs: predicted vs measured, error per row,
mean and max |error| per source and overall. `--fit` reruns the calibration grid search
(gemm_half_width x elementwise_traffic on the Korthikanti rows) and prints the best."""
import sys
from dataclasses import replace

from ledger.step import DEFAULT, estimate
from ledger.system import system
from ledger.validation import predicted, runs


def table(cal=DEFAULT, out=print):
    errors: dict[str, list[float]] = {}
    out(f"{'source':<17} {'run':<22} {'metric':<26} {'measured':>9} {'predicted':>9} {'error':>7}")
    for r in runs():
        est = estimate(r.model, r.cfg, system(r.gpu), cal)
        p = predicted(r, est)
        err = (p - r.measured) / r.measured
        errors.setdefault(r.source, []).append(abs(err))
        out(f"{r.source:<17} {r.label:<22} {r.metric:<26} {r.measured:9.2f} {p:9.2f} {err:+7.1%}")
    every = [e for v in errors.values() for e in v]
    for src, errs in [*errors.items(), ("all rows", every)]:
        out(f"{src:<17} mean |error| {sum(errs) / len(errs):.1%}   max {max(errs):.1%}")
    return errors


def fit():
    scores = []
    for w in (64, 128, 192, 256, 384, 512):
        for g in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0):
            cal = replace(DEFAULT, gemm_half_width=w, elementwise_traffic=g)
            k = table(cal, out=lambda *_: None)["Korthikanti 2022"]
            scores.append((sum(k) / len(k), max(k), w, g))
    for mean, worst, w, g in sorted(scores)[:5]:
        print(f"gemm_half_width {w:5.0f}  elementwise_traffic {g:3.1f}  Korthikanti mean "
              f"{mean:.1%} max {worst:.1%}")


if __name__ == "__main__":
    fit() if "--fit" in sys.argv else table()
