"""``python -m ledger.toys zero|tp|cp|pp|ep|all [--world 4] [--backend gloo|nccl] [--json]``

Also ``train-ledger toys ...`` and ``torchrun --nproc_per_node 4 -m ledger.toys all``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from ledger.toys.launcher import SPAWN_BASELINE, TOYS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train-ledger toys",
                                description="Run each parallelism mechanism for real.")
    p.add_argument("toy", choices=TOYS + ("all", SPAWN_BASELINE),
                   help="which mechanism ('spawn' is the launch baseline: one all-reduce)")
    p.add_argument("--world", type=int, default=4, help="ranks (built-in launcher)")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--json", action="store_true", help="one JSON object with every report")
    p.add_argument("--inject-fault", help=argparse.SUPPRESS)  # test hook: raise:R | die:R
    return p


def render(rep) -> str:
    lines = [f"== {rep.name} " + "=" * (60 - len(rep.name))]
    lines += [f"  {ln}" for ln in rep.lines]
    if rep.bytes:
        lines.append("  bytes handed to collectives, per rank (ring model) vs the ledger:")
        for b in rep.bytes:
            mark = "exact" if b.exact else "differs"
            lines.append(f"    {b.collective:<15} measured {_ints(b.measured)}  ledger "
                         f"{_ints(b.predicted)}  {mark}")
            if b.note:
                lines.append(f"      note: {b.note}")
    for c in rep.checks:
        lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}" + (f" ({c.detail})"
                                                                   if c.detail else ""))
    return "\n".join(lines)


def _ints(xs) -> str:
    return "[" + ", ".join(f"{x:g}" for x in xs) + "]"


def _check_world(world: int, names: list[str]) -> str | None:
    if world < 2:
        return f"world: must be >= 2, got {world}"
    if any(n in ("zero", "cp", "ep") for n in names) and 8 % world:
        return f"world: zero/cp/ep split 8 elements, tokens or experts; world({world}) must divide 8"
    return None


def main(argv: list[str] | None = None) -> int:
    from ledger.toys import launcher

    p = _parser()
    a = p.parse_args(argv)
    names = list(TOYS) if a.toy == "all" else [a.toy]
    fault = None
    if a.inject_fault:
        kind, _, rank = a.inject_fault.partition(":")
        fault = (kind, int(rank))
    show = (lambda rep: None) if a.json else (lambda rep: print(render(rep), flush=True))
    if launcher.under_torchrun():
        out = launcher.run_under_torchrun(names, a.backend, show)
        import os
        if os.environ.get("RANK", "0") != "0":
            return 0
    else:
        err = _check_world(a.world, names)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        out = launcher.launch(names, a.world, a.backend, show, fault)
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1
    checks = [c for r in out.reports for c in r.checks]
    failed = sum(not c.ok for c in checks)
    if a.json:
        print(json.dumps({"ok": out.ok, "reports": [asdict(r) for r in out.reports]}, indent=1))
    elif names != [SPAWN_BASELINE]:
        print(f"toys: {len(checks) - failed} passed, {failed} failed")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
