"""``python -m ledger.toys.torchrun [torchrun's flags] -m ledger.toys all``: torchrun, with
the launcher's one-line ending.

torchrun stays the engine: its own ``parse_args`` and ``run`` (torch/distributed/run.py,
torch 2.13.0) start, rendezvous and watch the ranks; nothing here reimplements them. What
this adds is the ending. A rank that fails has already said why in one line (rank 0 names
the rank, ``ledger.toys.launcher.run_under_torchrun``), so the agent's ``ChildFailedError``
summary and its traceback are left unprinted and the exit status is the failed rank's; an
agent that cannot start (a taken ``--master-port``, a bad rendezvous endpoint) is one line
naming what it tried; Ctrl-C before or while the world runs is one line (``early``). The
agent's informational logging is kept off stderr, as the built-in launcher keeps its own.
"""
from __future__ import annotations

import sys

from ledger.toys.early import quit_on_signals

if __name__ == "__main__":  # before torch loads: Ctrl-C is one line, not a traceback
    quit_on_signals()


def _first_failure(err) -> int:
    """The exit code of the first failed rank of a ``ChildFailedError`` (1 if none)."""
    failures = getattr(err, "failures", {}) or {}
    codes = [f.exitcode for f in failures.values() if getattr(f, "exitcode", 0)]
    return next((c for c in codes if c > 0), 1)


def _clip(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed import run as torchrun

    args = torchrun.parse_args(argv)
    # the agent's loggers each take their level at import (elastic/utils/logging.py
    # _setup_logger): its notes and its per-rank failure line stay off stderr
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        torchrun.run(args)
    except ChildFailedError as e:  # the rank's own line is already on stderr
        return _first_failure(e)
    except Exception as e:  # noqa: BLE001 - the agent's start: one line, whatever raised
        where = "localhost:0 (--standalone)" if args.standalone else (
            args.rdzv_endpoint or f"{args.master_addr}:{args.master_port}")
        print(f"error: torchrun: {type(e).__name__} at {where}: {_clip(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
