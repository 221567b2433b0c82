"""``train-ledger verify [--world 4] [--json] [--only NAME ...]``: PyTorch's own DDP, FSDP2,
HSDP, DTensor TP (+SP), pipelining and an expert all-to-all, one step each on real gloo
processes, their bytes and state against the ledger. Exit status 1 if any row is off."""
from __future__ import annotations

from ledger.toys.early import PARENT, quit_on_signals

if __name__ == "__main__":  # python -m / torchrun -m: before any import Ctrl-C could
    quit_on_signals()  # interrupt with a traceback (train-ledger's main catches it itself)

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict  # noqa: E402

from ledger.io.limits import OneLineParser  # noqa: E402
from ledger.toys.wire import FRAMING_SIZES  # noqa: E402


def _rows(reports):
    return [r for rep in reports for r in rep.rows]


def _num(x, spec) -> str:
    return "-" if x is None else format(x, spec)


def table(rows, world: int = 4) -> str:
    """One line per (strategy, check, collective); ranks whose figures agree are folded
    together. ``payload``: ring bytes of what was handed to the collectives; ``wire``:
    the kernel's bytes less gloo's framing, held to ``expected`` (the ledger's figure,
    or gloo's own where its algorithm differs; the note says so)."""
    groups: dict[tuple, list] = {}
    for r in rows:
        key = (r.strategy, r.check, r.collective, r.predicted_bytes, r.measured_bytes,
               r.wire_bytes, r.wire_expected, r.note)
        groups.setdefault(key, []).append(r)
    w = [max([len(k[i]) for k in groups] + [len(h)]) + 2
         for i, h in ((0, "strategy"), (1, "check"), (2, "what"))]
    lines = [f"{'strategy':<{w[0]}}{'check':<{w[1]}}{'what':<{w[2]}}{'ranks':<7}"
             f"{'ledger':>11}{'payload':>11}{'ratio':>7}{'wire':>11}{'expected':>11}"
             f"{'ratio':>7}  ok   note"]
    for (strategy, check, coll, pred, meas, wb, we, note), rs in groups.items():
        ranks = "all" if len(rs) == world else ",".join(str(r.rank) for r in rs)
        lines.append(f"{strategy:<{w[0]}}{check:<{w[1]}}{coll:<{w[2]}}{ranks:<7}{pred:>11,.0f}"
                     f"{meas:>11,.0f}{rs[0].ratio:>7.3f}{_num(wb, ',.0f'):>11}"
                     f"{_num(we, ',.0f'):>11}{_num(rs[0].wire_ratio, '.3f'):>7}  "
                     f"{'yes' if rs[0].ok else 'NO ':<4} {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ledger.toys import quiet

    return quiet.run(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from ledger.toys import launcher, quiet
    from ledger.verify.runner import Strategy
    from ledger.verify.strategies import STRATEGIES, WORLD

    p = OneLineParser(prog="train-ledger verify", description=__doc__)
    p.add_argument("--world", type=int, default=WORLD, help=f"ranks (the strategies need {WORLD})")
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", nargs="+", choices=tuple(STRATEGIES), help="a subset of strategies")
    a = p.parse_args(argv)
    torchrun = launcher.under_torchrun()
    world = launcher.torchrun_world() if torchrun else a.world
    if world != WORLD:
        if not torchrun or os.environ.get("RANK") == "0":
            print(f"error: world: the verify strategies are laid out for {WORLD} ranks, "
                  f"got {world}", file=sys.stderr)
        return 2
    jobs = [Strategy(n) for n in (a.only or STRATEGIES)]
    if torchrun:
        out = launcher.run_under_torchrun(jobs, "gloo", lambda rep: None, PARENT)
        rank = os.environ.get("RANK", "0")
        if out.error and (rank == "0" or not launcher.consequence(out.error)):
            print(f"error: {out.error}", file=sys.stderr)  # its own cause, or rank 0's
        if out.error:
            launcher.exit_now(1)
        if rank != "0":
            return 0
    else:
        quiet.note_stale_env()
        out = launcher.launch(jobs, WORLD, "gloo")
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1
    rows = _rows(out.reports)
    framing = out.reports[0].framing if out.reports else None
    if a.json:
        keys = ("check", "strategy", "collective", "predicted_bytes", "measured_bytes", "ratio",
                "tolerance", "wire_bytes", "wire_ratio", "wire_expected", "gloo_bytes",
                "framing_bytes", "wire_tolerance", "ok", "note", "rank")
        print(json.dumps({"framing": asdict(framing) if framing else None,
                          "rows": [{k: getattr(r, k) for k in keys} for r in rows]}, indent=1))
    else:
        print(table(rows, WORLD))
        if framing:
            print(f"gloo framing, measured (probe messages of {', '.join(map(str, FRAMING_SIZES))}"
                  f" B, fit bytes = a + payload): {framing.send_bytes:g} B per message sent, "
                  f"{framing.recv_bytes:g} B per message received (largest misfit "
                  f"{framing.fit_residual_bytes:g} B); subtracted from every wire figure")
        bad = sum(not r.ok for r in rows)
        print(f"verify: {len(rows) - bad} passed, {bad} failed")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
