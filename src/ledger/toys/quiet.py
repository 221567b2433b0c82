"""How a torch command ends when it is told to: Ctrl-C, SIGTERM, a closed pipe.

``run(body)`` returns the body's exit status (2 after one line for a bad argument), or
after one line on stderr 130 (SIGINT) / 143 (SIGTERM) once the launcher has ended every
rank, or 141 when stdout's reader went away (``toys all | head -1``): stdout is pointed
at /dev/null so the interpreter's last flush cannot raise again, and nothing more is
printed.
"""
from __future__ import annotations

import os
import sys

from ledger.errors import LedgerError

SIGPIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a writer whose pipe closed


def run(body) -> int:
    import signal

    from ledger.toys.launcher import Interrupted

    def interrupted(signum, frame):
        raise Interrupted(signum)
    for s in (signal.SIGINT, signal.SIGTERM):  # from the first moment, torch not yet loaded
        signal.signal(s, interrupted)
    try:
        return body()
    except LedgerError as e:  # a usage error (ledger.io.limits.OneLineParser): one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"{e} received: every rank ended", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_EXIT


def note_stale_env() -> None:
    """RANK / WORLD_SIZE / MASTER_ADDR ... without torchrun: say so, then ignore them."""
    from ledger.toys import launcher

    stale = launcher.stale_env()
    if stale:
        print(f"note: ignoring {', '.join(f'{k}={os.environ[k]}' for k in stale)} from the "
              f"environment (not started by torchrun); the built-in launcher forks its own "
              f"ranks", file=sys.stderr)
        launcher.clear_env(stale)
