"""A dependency simulator for pipeline schedules: makespan, bubble, in-flight activations.

Each rank runs its actions in order; an action starts when its rank is free and its
inputs exist: a forward needs the previous stage's forward of the same micro-batch,
a backward (B, or its input half I) needs the next stage's backward and its own
forward, a weight gradient W needs its own I. Crossing ranks adds ``p2p_s``.

Costs are per stage of a whole rank (all its layers): with v stages per rank each
chunk costs 1/v of them, which is what makes interleaving shrink the bubble.

>>> from ledger.schedules import build
>>> round(simulate(build("1f1b", 4, 8), Costs(1, 2)).bubble_fraction, 4)  # 3/11
0.2727
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ledger.errors import LedgerError
from ledger.schedules import Action, Schedule, build, peak_inflight


@dataclass(frozen=True)
class Costs:
    """Seconds (or any unit) per micro-batch for one rank's whole share of layers."""

    f: float = 1.0  # forward
    b: float = 2.0  # full backward; a split backward costs i + w instead
    i: float | None = None  # input-gradient half (default b/2)
    w: float | None = None  # weight-gradient half (default b - i)
    p2p_s: float = 0.0  # latency of a cross-rank dependency

    def of(self, kind: str) -> float:
        i = self.b / 2 if self.i is None else self.i
        w = self.b - i if self.w is None else self.w
        return {"F": self.f, "B": self.b, "I": i, "W": w}[kind]


@dataclass(frozen=True)
class Timed:
    action: Action
    rank: int
    start: float
    end: float


@dataclass(frozen=True)
class SimResult:
    schedule: Schedule
    timeline: list[list[Timed]]  # per rank, in execution order
    makespan: float
    busy: list[float]  # per rank
    peak_inflight: list[float]  # per rank, in whole-stage micro-batches (chunks / v)

    @property
    def idle(self) -> list[float]:
        return [self.makespan - b for b in self.busy]

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the step, averaged over ranks."""
        return sum(self.idle) / (self.makespan * len(self.busy)) if self.makespan else 0.0


def _deps(a: Action, last_stage: int) -> list[tuple[str, int, int]]:
    if a.kind == "F":
        return [("F", a.mb, a.stage - 1)] if a.stage > 0 else []
    if a.kind in ("B", "I"):
        deps = [("F", a.mb, a.stage)]
        if a.stage < last_stage:
            deps.append(("B", a.mb, a.stage + 1))  # B and I both hand the gradient on
        return deps
    return [("I", a.mb, a.stage)]


def simulate(sched: Schedule, costs: Costs = Costs()) -> SimResult:
    """Run every rank's list against the dependencies; refuse a schedule that deadlocks."""
    last = sched.stages - 1
    done: dict[tuple[str, int, int], tuple[float, int]] = {}  # -> (end, rank)
    pos = [0] * sched.pp
    free = [0.0] * sched.pp
    timeline: list[list[Timed]] = [[] for _ in range(sched.pp)]
    remaining = sum(len(r) for r in sched.ranks)
    while remaining:
        progressed = False
        for r, acts in enumerate(sched.ranks):
            while pos[r] < len(acts):
                a = acts[pos[r]]
                keys = [(("B" if k == "B" and ("I", mb, st) in done else k), mb, st)
                        for k, mb, st in _deps(a, last)]
                keys = [("I", mb, st) if k == "B" and ("B", mb, st) not in done
                        and ("I", mb, st) in done else (k, mb, st) for k, mb, st in keys]
                if any(k not in done for k in keys):
                    break
                ready = max([free[r]] + [done[k][0] + (costs.p2p_s if done[k][1] != r else 0)
                                         for k in keys])
                end = ready + costs.of(a.kind) / sched.v
                done[(a.kind, a.mb, a.stage)] = (end, r)
                timeline[r].append(Timed(a, r, ready, end))
                free[r], pos[r] = end, pos[r] + 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: str(acts[pos[r]]) for r, acts in enumerate(sched.ranks)
                     if pos[r] < len(acts)}
            raise LedgerError("schedule", f"{sched.name} deadlocks: ranks wait at {stuck}")
    makespan = max(free)
    busy = [sum(t.end - t.start for t in row) for row in timeline]
    peaks = [peak_inflight(acts) / sched.v for acts in sched.ranks]
    return SimResult(sched, timeline, makespan, busy, peaks)


@lru_cache(maxsize=4096)
def simulated(kind: str, pp: int, m: int, v: int = 1, f: float = 1.0,
              b: float = 2.0) -> SimResult:
    """Cached ``simulate(build(kind, pp, m, v), Costs(f, b))`` for the placement."""
    return simulate(build(kind, pp, m, v), Costs(f, b))


def inflight_closed(kind: str, rank, p, m, v):
    """Peak micro-batches (whole-stage equivalents) rank ``rank`` holds, in closed form -
    equal to the simulator's count (tests/test_schedules.py); numbers or arrays.

    1F1B: min(p - r, m); GPipe: m; interleaved: its warm-up + 1 chunks, over v;
    ZB-H1 / interleaved zero-bubble: W waits r steps, so every rank holds min(p, m)
    stages' worth; ZB-V: p (for m >= 2p - 1).
    """
    if kind == "gpipe":
        return m + 0 * rank
    if kind == "1f1b":
        return np.minimum(p - rank, m)
    if kind == "interleaved":
        return np.minimum((v - 1) * p + 2 * (p - 1 - rank) + 1, m * v) / v
    return np.minimum(p, m) + 0 * rank  # zb-h1, interleaved-zb, zb-v
