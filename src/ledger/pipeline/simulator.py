"""A dependency simulator for pipeline schedules: makespan, bubble, in-flight activations.

Each rank runs its actions in order; an action starts when its rank is free and its
inputs exist: a forward needs the previous stage's forward of the same micro-batch,
a backward (B, or its input half I) needs the next stage's backward and its own
forward, a weight gradient W needs its own I; an overlapped pair FB needs what its
forward and its backward need. Crossing ranks adds ``p2p_s``.

Costs are per micro-batch of a whole rank (all the layers one micro-batch passes on
it): with v stages per rank each chunk costs 1/v of them, which is what makes
interleaving shrink the bubble (DualPipe's micro-batches pass one of a rank's two stage
copies: a chunk costs all of it, ``Schedule.visits``).

>>> from ledger.pipeline.schedules import build
>>> round(simulate(build("1f1b", 4, 8), Costs(1, 2)).bubble_fraction, 4)  # 3/11
0.2727
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ledger.errors import LedgerError
from ledger.pipeline.schedules import SPLIT_BACKWARD, Action, Schedule, build, peak_inflight


@dataclass(frozen=True)
class Costs:
    """Seconds (or any unit) per micro-batch for one rank's whole share of layers."""

    f: float = 1.0  # forward
    b: float = 2.0  # full backward; a split backward costs i + w instead
    i: float | None = None  # input-gradient half (default b/2)
    w: float | None = None  # weight-gradient half (default b - i)
    p2p_s: float = 0.0  # latency of a cross-rank dependency
    fb: float | None = None  # an overlapped forward + full backward pair (default f + b)

    def of(self, kind: str) -> float:
        i = self.b / 2 if self.i is None else self.i
        w = self.b - i if self.w is None else self.w
        fb = self.f + self.b if self.fb is None else self.fb
        return {"F": self.f, "B": self.b, "I": i, "W": w, "FB": fb}[kind]


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


def _deps(a: Action, chain: int) -> list[tuple[str, int, int]]:
    """What ``a`` waits for; a micro-batch passes ``chain`` stages (stage s in chain
    s // chain), entering at the first and turning back at the last."""
    if a.kind == "FB":
        return [d for part in a.parts() for d in _deps(part, chain)]
    if a.kind == "F":
        return [("F", a.mb, a.stage - 1)] if a.stage % chain else []
    if a.kind in ("B", "I"):
        deps = [("F", a.mb, a.stage)]
        if a.stage % chain < chain - 1:
            deps.append(("B", a.mb, a.stage + 1))  # B and I both hand the gradient on
        return deps
    return [("I", a.mb, a.stage)]


def _found(key: tuple[str, int, int], done: dict):
    """The finished action a dependency names: a backward dependency is met by the next
    stage's full backward B or, under a split backward, its input half I."""
    kind, mb, st = key
    for k in ((("B", mb, st), ("I", mb, st)) if kind == "B" else (key,)):
        if k in done:
            return k
    return None


def simulate(sched: Schedule, costs: Costs = Costs()) -> SimResult:
    """Run every rank's list against the dependencies; refuse a schedule that deadlocks.

    Event-driven: a rank runs until an input is missing, then waits on that input and is
    woken when it is produced, so the work is linear in the number of actions. An action
    starts at the later of its rank being free and its inputs' ends (+ p2p across ranks),
    whatever order the ranks are visited in."""
    chain = sched.chain
    done: dict[tuple[str, int, int], tuple[float, int]] = {}  # -> (end, rank)
    pos = [0] * sched.pp
    free = [0.0] * sched.pp
    timeline: list[list[Timed]] = [[] for _ in range(sched.pp)]
    remaining = sum(len(r) for r in sched.ranks)
    waiting: dict[tuple[str, int, int], list[int]] = {}
    runnable = list(range(sched.pp - 1, -1, -1))
    queued = [True] * sched.pp  # each rank is in ``runnable`` at most once
    while runnable:
        r = runnable.pop()
        queued[r] = False
        acts = sched.ranks[r]
        while pos[r] < len(acts):
            a = acts[pos[r]]
            deps = _deps(a, chain)
            keys = [_found(k, done) for k in deps]
            if None in keys:
                kind, mb, st = deps[keys.index(None)]
                for k in (("B", mb, st), ("I", mb, st)) if kind == "B" else ((kind, mb, st),):
                    waiting.setdefault(k, []).append(r)
                break
            ready = max([free[r]] + [done[k][0] + (costs.p2p_s if done[k][1] != r else 0)
                                     for k in keys])
            end = ready + costs.of(a.kind) / sched.visits
            timeline[r].append(Timed(a, r, ready, end))
            free[r], pos[r] = end, pos[r] + 1
            remaining -= 1
            for part in a.parts():
                key = (part.kind, part.mb, part.stage)
                done[key] = (end, r)
                for w in waiting.pop(key, ()):
                    if not queued[w]:
                        queued[w] = True
                        runnable.append(w)
    if remaining:
        stuck = {r: str(acts[pos[r]]) for r, acts in enumerate(sched.ranks)
                 if pos[r] < len(acts)}
        raise LedgerError("schedule", f"{sched.name} deadlocks: ranks wait at {stuck}")
    makespan = max(free)
    busy = [sum(t.end - t.start for t in row) for row in timeline]
    peaks = [peak_inflight(acts) / sched.v for acts in sched.ranks]
    return SimResult(sched, timeline, makespan, busy, peaks)


# The most passes (forward, backward or weight-gradient actions of one micro-batch on one
# stage) the simulator runs for one question; each costs 10-30 us here, so 200,000 stay
# within seconds. Past it a placement is priced from two shorter simulations (below)
# and the ``schedule`` command, which draws every pass, refuses.
MAX_PASSES = 200_000
MAX_DRAWN = 20_000  # passes the ``schedule`` command simulates, prints and draws


def passes(kind: str, pp: int, m: int, v: int) -> int:
    """Actions a schedule runs: every micro-batch on every stage forward and backward,
    the backward split in two on the zero-bubble schedules."""
    return pp * v * m * (3 if kind in SPLIT_BACKWARD else 2)


def check_drawable(kind: str, pp: int, m: int, v: int) -> None:
    """Refuse a time line too long to simulate and draw, naming the limit."""
    n = passes(kind, pp, m, v)
    if n > MAX_DRAWN:
        raise LedgerError("schedule", f"pp({pp}) x vp({v}) x microbatches({m}) = {n:,} passes "
                                      f"exceeds the {MAX_DRAWN:,} this command draws; "
                                      f"report/estimate price larger pipelines")


MAX_CELLS = 10_000  # a drawn time line's length, in units of its shortest action


def check_cells(sim: SimResult) -> None:
    """Refuse to draw a time line whose shortest action would be a speck: the pictures
    give the shortest action one cell, so the makespan in cells bounds their size."""
    shortest = min(t.end - t.start for row in sim.timeline for t in row)
    cells = sim.makespan / shortest
    if cells > MAX_CELLS:
        raise LedgerError("schedule", f"the makespan is {cells:,.0f} x the shortest action; "
                                      f"time lines draw at most {MAX_CELLS:,} (use --json)")


def placement_pipeline(kind: str, pp: int, m: int, v: int,
                       group: int | None = None) -> tuple[float, tuple]:
    """Bubble fraction and per-rank peak in-flight micro-batches of a placement (forward
    1, backward 2, no p2p latency), with bounded work for any m: the simulation up to
    MAX_PASSES, past it the line of ``makespan_bounded`` (each rank is busy m (f + b) =
    3m, so the idle time is the makespan less 3m; drawn with pp-sized groups) and
    ``inflight_closed``; ``group``: Megatron's micro-batch group (``schedules._rounds``)."""
    if passes(kind, pp, m, v) <= MAX_PASSES:
        sim = simulated(kind, pp, m, v, group=group)
        return sim.bubble_fraction, tuple(sim.peak_inflight)
    m1, t1, slope = _steady_line(kind, pp, m, v, Costs(1.0, 2.0))
    idle = (t1 - 3.0 * m1) + (m - m1) * (slope - 3.0)  # no cancellation at large m
    return idle / (idle + 3.0 * m), tuple(float(inflight_closed(kind, r, pp, m, v, group))
                                          for r in range(pp))


def makespan_bounded(kind: str, pp: int, m: int, v: int, costs: Costs) -> float:
    """The simulated makespan with bounded work. Up to MAX_PASSES it is the simulation;
    past it the schedule is simulated at m0 = 2 pp and m1 = 3 pp micro-batches (multiples
    of pp; >= 2pp - 1 as ZB-V needs) and extended along the line through them: once the
    pipeline is full every extra micro-batch adds the same time. tests/test_bad_input.py
    holds this to full simulations for every schedule at the placement's costs and for
    interleaved-zb (the one the time model simulates) with p2p latency up to 3 t_f.
    """
    if passes(kind, pp, m, v) <= MAX_PASSES:
        return simulate(build(kind, pp, m, v), costs).makespan
    m1, t1, slope = _steady_line(kind, pp, m, v, costs)
    return t1 + (m - m1) * slope


def _steady_line(kind: str, pp: int, m: int, v: int, costs: Costs) -> tuple[int, float, float]:
    """(m1, makespan at m1, makespan per extra micro-batch) from two short simulations."""
    m0, m1 = 2 * pp, 3 * pp
    if m <= m1 or passes(kind, pp, m1, v) > MAX_PASSES:
        raise LedgerError("pp", f"pp({pp}) x vp({v}) x microbatches({m}) = "
                                f"{passes(kind, pp, m, v):,} passes exceeds the "
                                f"{MAX_PASSES:,} the simulator runs")
    t0, t1 = (simulate(build(kind, pp, n, v), costs).makespan for n in (m0, m1))
    return m1, t1, (t1 - t0) / (m1 - m0)


@lru_cache(maxsize=4096)
def simulated(kind: str, pp: int, m: int, v: int = 1, f: float = 1.0,
              b: float = 2.0, group: int | None = None) -> SimResult:
    """Cached ``simulate(build(kind, pp, m, v), Costs(f, b))`` for the placement."""
    return simulate(build(kind, pp, m, v, group=group), Costs(f, b))


def interleaved_warmup(rank, p, m, v, group=None):
    """Forwards a rank of Megatron's interleaved schedule runs before its first backward:
    (v-1) g + 2 (p-1-r), at most m v, g the micro-batch group, p unless set (schedules.py
    L959-965 @d98e8a64; ``schedules._rounds``)."""
    g = p if group is None else group
    return np.minimum((v - 1) * g + 2 * (p - 1 - np.asarray(rank)), m * v)


def inflight_closed(kind: str, rank, p, m, v, group=None):
    """Peak micro-batches (whole-stage equivalents) rank ``rank`` holds, in closed form -
    equal to the simulator's count (tests/test_schedules.py); numbers or arrays.

    1F1B: min(p - r, m); GPipe: m; interleaved: its warm-up + 1 chunks, over v (the
    warm-up (v-1) g + 2 (p-1-r), g the micro-batch group, p unless set: schedules.py
    L959-965 @d98e8a64);
    ZB-H1 / interleaved zero-bubble: W waits r steps, so every rank holds min(p, m)
    stages' worth; ZB-V (torch 2.13.0 pipelining/schedules.py L3268-3390, trimmed to m
    micro-batches at L3380-3389): the peak is just before the first W (every later
    forward is followed by a W), when rank r has run min(2p - r - 1, m) forwards of its
    first chunk (warmup_n1 + warmup_n2, L3277-3295) and min(r + 1, m) of its second
    (warmup_n2 + warmup_n3's first): (min(2p - r - 1, m) + min(r + 1, m)) / 2, which is p
    from m = 2p - 1 on (tests/test_zbv_inflight.py holds it to torch's tables); DualPipe PP + 1 chunks
    of one stage (DeepSeek-V3 report Table 2; PP = p stages, 2p for DualPipeV), over the
    2 stages a rank holds.
    """
    if kind == "dualpipe":
        return (p + 1) / 2 + 0 * rank * m
    if kind == "dualpipev":
        return (2 * p + 1) / 2 + 0 * rank * m
    if kind == "gpipe":
        return m + 0 * rank
    if kind == "1f1b":
        return np.minimum(p - rank, m)
    if kind == "interleaved":
        return np.minimum(interleaved_warmup(rank, p, m, v, group) + 1, m * v) / v
    if kind == "zb-v":
        return (np.minimum(2 * p - rank - 1, m) + np.minimum(rank + 1, m)) / 2
    return np.minimum(p, m) + 0 * rank  # zb-h1, interleaved-zb
