"""The time model against measured training runs: predicted vs measured per row, the
calibration set and the prediction rows apart, mean and max |error| per source and per
set. Open settings are set by ledger.validation's one rule (shown per row). Then the
Megatron-Bridge precision tutorial's run in BF16 / FP8 / MXFP8 / NVFP4 (``tutorial``)."""
from ledger.validation import predicted, runs, settle


def _settings(r, cfg, ov) -> str:
    parts = [f"mb={cfg.micro_batch}"] if "micro_batch" in r.open else []
    parts += [f"vp={cfg.vp}"] if "vp" in r.open else []
    parts += [f"rc={cfg.recompute}"] if "recompute" in r.open else []
    parts += [f"tpov={'on' if ov else 'off'}"] if "tp_overlap" in r.open else []
    return " ".join(parts) or "-"


def table(out=print) -> dict:
    errors: dict[tuple[str, str], list[float]] = {}
    out(f"{'set':<5} {'source':<17} {'run':<30} {'measured':>9} {'predicted':>9} {'error':>7}"
        f"  rule's settings")
    for role in ("calibration", "prediction"):
        for r in (r for r in runs() if r.role == role):
            cfg, ov, est = settle(r)
            p = predicted(r, est, cfg)
            err = (p - r.measured) / r.measured
            errors.setdefault((role, r.source), []).append(abs(err))
            fits = "" if est.fits else " (does not fit)"
            out(f"{role[:5]:<5} {r.source:<17} {r.label:<30} {r.measured:9.2f} {p:9.2f} "
                f"{err:+7.1%}  {_settings(r, cfg, ov)}{fits}")
    for role in ("calibration", "prediction"):
        every = []
        for (rl, src), errs in errors.items():
            if rl == role:
                every += errs
                out(f"{role[:5]:<5} {src:<17} mean |error| {sum(errs) / len(errs):5.1%}   "
                    f"max {max(errs):5.1%}   ({len(errs)} rows)")
        out(f"{role[:5]:<5} {'all ' + role + ' rows':<17} mean |error| "
            f"{sum(every) / len(every):5.1%}   max {max(every):5.1%}   ({len(every)} rows)")
    return errors


def tutorial(out=print) -> None:
    """The Megatron-Bridge precision tutorial's run in four precisions (prediction rows,
    ledger.validation.tutorial): step time and the speed-ups between precisions."""
    from ledger.render.bridge_tutorial import lines

    for line in lines():
        out(line)


if __name__ == "__main__":
    table()
    print()
    tutorial()
