"""How the built-in launcher tells a slow world from a hung one: progress, not wall time
(``ledger.toys.launcher`` polls ``Progress.hangs`` while its ranks run)."""
from __future__ import annotations

import os
import time

PROGRESS_SHARE = 1 / 60  # CPU time, as a share of the limit, that a rank must spend to
# count as progressing: 1 s in 60 s, so a rank throttled to 3% of a core progresses, while
# the idle threads of one waiting in a collective tick ~2 ms a minute
MAX_GAP_S = 1.0  # the most one poll counts towards a hang: a stopped or starved parent
# (SIGSTOP, Ctrl-Z) sees a long gap that no rank is to blame for


class Progress:
    """How long the world has gone without progress, counted only while the parent
    watches (a poll counts at most MAX_GAP_S). A rank progresses when it sends a message
    or spends PROGRESS_SHARE of the limit in CPU time; the world progresses while any rank
    does (the others may be waiting on it in a collective), and while it is runnable (a
    busy machine may not give it a core for a while). A world quiet for
    ``limit_s`` hangs, and the rank named is a stopped one, else the one that has said
    least (it never reached the job the others started), else the one whose CPU went
    idle first."""

    def __init__(self, procs, limit_s: float):
        self.procs, self.limit_s, self.last = procs, limit_s, time.monotonic()
        self.quiet_s = [0.0] * len(procs)
        self.cpu_s = [None] * len(procs)  # CPU time at the rank's last progress
        self.ticks = [(-1.0, self.last)] * len(procs)  # (CPU time, when it last moved)
        self.said = [0] * len(procs)  # messages from each rank

    def heard(self, rank: int) -> None:
        self.quiet_s[rank], self.cpu_s[rank] = 0.0, None
        self.said[rank] += 1

    def hangs(self, done: set) -> list[str]:
        now = time.monotonic()
        gap, self.last = min(now - self.last, MAX_GAP_S), now
        states, busy_s = {}, PROGRESS_SHARE * self.limit_s
        for rank, p in enumerate(self.procs):
            cpu, states[rank] = _cpu_and_state(p.pid)
            if cpu != self.ticks[rank][0]:
                self.ticks[rank] = (cpu, now)
            if self.cpu_s[rank] is None or cpu - self.cpu_s[rank] >= busy_s or \
                    states[rank] == "R":  # running, or runnable on a busy machine
                self.cpu_s[rank], self.quiet_s[rank] = cpu, 0.0
            else:
                self.quiet_s[rank] += gap
        live = [r for r in range(len(self.procs)) if r not in done]
        if not live or min(self.quiet_s[r] for r in live) <= self.limit_s:
            return []
        stopped = [r for r in live if states[r] in "Tt"]
        rank = (stopped or sorted(live, key=lambda r: (self.said[r], self.ticks[r][1])))[0]
        others = len(live) - 1
        return [f"rank {rank}: no progress for {self.limit_s:g} s"
                f"{' (stopped)' if stopped else ''}, a hang"
                + (f"; {others} other rank(s) waited on it" if others else "")]


def _cpu_and_state(pid: int) -> tuple[float, str]:
    """A process's CPU time (user + system, seconds) and its state letter (/proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, "?"
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), fields[0].decode()
