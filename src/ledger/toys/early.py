"""What a torch command does before its first heavy import: SIGINT / SIGTERM end it at
once with one line (exit 128 + the signal), so Ctrl-C while torch or the ledger loads is
never a ``KeyboardInterrupt`` traceback; and the pid of the process that started it (under
torchrun, its agent), taken before anything could outlive it. Imports nothing but the
standard library; ``ledger.toys.quiet.run`` installs the handlers of a running world."""
from __future__ import annotations

import os
import signal

PARENT = os.getppid()


def _quit(signum, frame):
    os.write(2, f"{signal.Signals(signum).name} received\n".encode())
    os._exit(128 + signum)


def quit_on_signals() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _quit)
