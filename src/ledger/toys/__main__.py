"""``python -m ledger.toys zero|tp|cp|pp|ep|all [--world 4] [--backend gloo|nccl] [--json]``

Also ``train-ledger toys ...`` and ``torchrun --standalone --nproc_per_node 4 -m ledger.toys
all``.
"""
from __future__ import annotations

import os
import sys

from ledger.toys.early import PARENT, quit_on_signals

if __name__ == "__main__":  # python -m / torchrun -m: before any import Ctrl-C could
    quit_on_signals()  # interrupt with a traceback (train-ledger's main catches it itself)

import argparse  # noqa: E402
import json  # noqa: E402
from dataclasses import asdict  # noqa: E402

from ledger.io.limits import OneLineParser  # noqa: E402
from ledger.toys.catalog import SPAWN_BASELINE, TOYS, WORLDS


def _parser() -> OneLineParser:
    p = OneLineParser(prog="train-ledger toys",
                                description="Run each parallelism mechanism for real.")
    p.add_argument("toy", choices=TOYS + ("all", SPAWN_BASELINE),
                   help="which mechanism ('spawn' is the launch baseline: one all-reduce)")
    p.add_argument("--world", type=int, default=4, help="ranks (built-in launcher)")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--json", action="store_true", help="one JSON object with every report")
    p.add_argument("--inject-fault", help=argparse.SUPPRESS)  # test hook: raise:R | die:R |
    # stop:R | slow:R | sleep:R (ledger.toys.launcher._inject)
    p.add_argument("--hang-limit-s", type=float, help=argparse.SUPPRESS)  # test hook
    return p


def render(rep) -> str:
    lines = [f"== {rep.name} " + "=" * (60 - len(rep.name))]
    lines += [f"  {ln}" for ln in rep.lines]
    if rep.bytes:
        lines.append("  bytes per rank: handed to collectives (ring model), on the wire "
                     "(kernel, less framing), the ledger's:")
        for b in rep.bytes:
            mark = "exact" if b.exact else "differs"
            lines.append(f"    {b.collective:<15} handed {_ints(b.measured)}  wire "
                         f"{_ints(b.wire) if b.wire else '-'}  ledger {_ints(b.predicted)}  {mark}")
            if b.wire_expected and b.wire_expected != b.predicted:
                lines.append(f"      wire held to gloo's figure {_ints(b.wire_expected)}")
            if b.note:
                lines.append(f"      note: {b.note}")
    for c in rep.checks:
        lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}" + (f" ({c.detail})"
                                                                   if c.detail else ""))
    return "\n".join(lines)


def _ints(xs) -> str:
    return "[" + ", ".join(f"{x:.0f}" if x == int(x) else f"{x:g}" for x in xs) + "]"


def check_world(world: int, names: list[str]) -> str | None:
    """One line naming the world sizes the chosen toys are laid out for, or None."""
    ok = set(WORLDS[names[0]])
    for n in names[1:]:
        ok &= set(WORLDS[n])
    if world not in ok:
        which = "toys " + ("all" if len(names) > 1 else names[0])
        sizes = sorted(ok)
        listed = ", ".join(map(str, sizes[:-1])) + f" or {sizes[-1]}"
        return f"world: {which} runs on {listed} ranks, got {world}"
    return None


def main(argv: list[str] | None = None) -> int:
    from ledger.toys import quiet

    return quiet.run(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from ledger.toys import launcher, quiet
    from ledger.toys.common import ToyJob

    p = _parser()
    a = p.parse_args(argv)
    names = list(TOYS) if a.toy == "all" else [a.toy]
    fault = None
    if a.inject_fault:
        kind, _, rank = a.inject_fault.partition(":")
        fault = (kind, int(rank))
    show = (lambda rep: None) if a.json else (lambda rep: print(render(rep), flush=True))
    torchrun = launcher.under_torchrun()
    err = check_world(launcher.torchrun_world() if torchrun else a.world, names)
    if err:
        if os.environ.get("RANK", "0") == "0" or not torchrun:
            print(f"error: {err}", file=sys.stderr)
        return 2
    jobs = [ToyJob(n) for n in names]
    if a.hang_limit_s:
        launcher.HANG_LIMIT_S = a.hang_limit_s
    if torchrun:
        out = launcher.run_under_torchrun(jobs, a.backend, show, PARENT, fault)
        rank = os.environ.get("RANK", "0")
        if out.error and (rank == "0" or not launcher.consequence(out.error)):
            print(f"error: {out.error}", file=sys.stderr)  # its own cause, or rank 0's
        if out.error:
            launcher.exit_now(1)
        if rank != "0":
            return 0
    else:
        quiet.note_stale_env()
        out = launcher.launch(jobs, a.world, a.backend, show, fault)
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1
    checks = [c for r in out.reports for c in r.checks]
    failed = sum(not c.ok for c in checks)
    if a.json:
        print(json.dumps({"ok": out.ok, "reports": [asdict(r) for r in out.reports]}, indent=1))
    elif names != [SPAWN_BASELINE]:
        f = next((r.framing for r in out.reports if r.framing), None)
        if f:
            print(f"gloo framing, measured: {f['send_bytes']:g} B per message sent, "
                  f"{f['recv_bytes']:g} B per message received; subtracted from the wire")
        print(f"toys: {len(checks) - failed} passed, {failed} failed")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
