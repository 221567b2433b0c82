"""``train-ledger verify [--world 4] [--json] [--only NAME ...]``: PyTorch's own DDP, FSDP2,
HSDP, DTensor TP (+SP), pipelining and an expert all-to-all, one step each on real gloo
processes, their bytes and state against the ledger. Exit status 1 if any row is off."""
from __future__ import annotations

import argparse
import json
import sys

from ledger.verify.strategies import STRATEGIES, WORLD


def _rows(reports):
    return [r for rep in reports for r in rep.rows]


def table(rows) -> str:
    """One line per (strategy, check, collective); ranks that agree are folded together."""
    groups: dict[tuple, list] = {}
    for r in rows:
        key = (r.strategy, r.check, r.collective, r.predicted_bytes, r.measured_bytes, r.note)
        groups.setdefault(key, []).append(r)
    w = [max([len(k[i]) for k in groups] + [len(h)]) + 2
         for i, h in ((0, "strategy"), (1, "check"), (2, "what"))]
    lines = [f"{'strategy':<{w[0]}}{'check':<{w[1]}}{'what':<{w[2]}}{'ranks':<7}{'predicted':>11}"
             f"{'measured':>11}{'ratio':>7}  ok   note"]
    for (strategy, check, coll, pred, meas, note), rs in groups.items():
        ranks = "all" if len(rs) == WORLD else ",".join(str(r.rank) for r in rs)
        lines.append(f"{strategy:<{w[0]}}{check:<{w[1]}}{coll:<{w[2]}}{ranks:<7}{pred:>11,.0f}"
                     f"{meas:>11,.0f}{rs[0].ratio:>7.3f}  {'yes' if rs[0].ok else 'NO ':<4} {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ledger.toys import launcher

    p = argparse.ArgumentParser(prog="train-ledger verify", description=__doc__)
    p.add_argument("--world", type=int, default=WORLD, help=f"ranks (the strategies need {WORLD})")
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", nargs="+", choices=tuple(STRATEGIES), help="a subset of strategies")
    a = p.parse_args(argv)
    if a.world != WORLD:
        print(f"error: world: the verify strategies are laid out for {WORLD} ranks, "
              f"got {a.world}", file=sys.stderr)
        return 2
    names = [f"verify:{n}" for n in (a.only or STRATEGIES)]
    out = launcher.launch(names, WORLD, "gloo")
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1
    rows = _rows(out.reports)
    if a.json:
        keys = ("check", "strategy", "collective", "predicted_bytes", "measured_bytes", "ratio",
                "tolerance", "ok", "note", "rank")
        print(json.dumps({"rows": [{k: getattr(r, k) for k in keys} for r in rows]}, indent=1))
    else:
        print(table(rows))
        bad = sum(not r.ok for r in rows)
        print(f"verify: {len(rows) - bad} passed, {bad} failed")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
