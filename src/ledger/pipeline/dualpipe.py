"""DualPipe and DualPipeV as action tables: each micro-batch's forward of one chunk run
beside another's backward (FB), micro-batches entering from both ends (DualPipe) or
through a V (DualPipeV). tests/test_dualpipe.py holds both to DeepSeek's reference
implementation and DualPipeV to torch 2.13's."""
from __future__ import annotations

from ledger.errors import require_positive
from ledger.pipeline.actions import Action


def _check(pp: int, m: int) -> None:
    require_positive("pp", pp)
    require_positive("num_microbatches", m)


class _Lane:
    """One rank's action list under construction, numbering each stage's micro-batches in
    order and queueing split backwards' weight halves first in, first out (DualPipe's
    WeightGradStore, torch's weight_queue)."""

    def __init__(self) -> None:
        self.acts: list[Action] = []
        self.count: dict[tuple[str, int], int] = {}
        self.weights: list[tuple[int, int]] = []

    def _next(self, kind: str, stage: int) -> int:
        i = self.count.get((kind, stage), 0)
        self.count[(kind, stage)] = i + 1
        return i

    def f(self, stage: int) -> None:
        self.acts.append(Action("F", self._next("F", stage), stage))

    def b(self, stage: int, split: bool = False) -> None:
        """A full backward, or (``split``) its input half with the weight half queued."""
        mb = self._next("B", stage)
        self.acts.append(Action("I" if split else "B", mb, stage))
        if split:
            self.weights.append((mb, stage))

    def w(self) -> None:
        """The oldest queued weight half, if any."""
        if self.weights:
            mb, stage = self.weights.pop(0)
            self.acts.append(Action("W", mb, stage))

    def fb(self, f_stage: int, b_stage: int) -> None:
        mb = self._next("F", f_stage)
        self.acts.append(Action("FB", mb, f_stage, self._next("B", b_stage), b_stage))


def _dual_lane(n: int, pos: int, chunks: int, s0: int, s1: int) -> list[Action]:
    """The eight steps of DeepSeek's schedule on one rank at position ``pos`` of ``n``
    (dualpipe.py L346-422, dualpipev.py L333-410), ``chunks`` micro-batches through its
    chunk 0 (stage ``s0``) and chunk 1 (``s1``): 2(n - pos - 1) forwards of chunk 0;
    pos + 1 pairs of both chunks' forwards; n - pos - 1 rounds of I1 W F1 (zero bubble);
    chunks - 2n + pos + 1 rounds of the overlapped pairs F0B1 and F1B0 (the last position
    runs its first pair apart, to shorten the bubble); n - pos - 1 rounds of B1 + F1B0;
    pos + 1 rounds of B1 B0 whose second half splits the backward (from the middle round,
    chunk 1 first at odd positions); n - pos - 1 rounds of W + I0; the queued weights."""
    lane, rest = _Lane(), n - pos - 1
    for _ in range(2 * rest):
        lane.f(s0)
    for _ in range(pos + 1):
        lane.f(s0)
        lane.f(s1)
    for _ in range(rest):
        lane.b(s1, True)
        lane.w()
        lane.f(s1)
    for i in range(chunks - 2 * n + pos + 1):
        if i == 0 and pos == n - 1:  # not overlapped, to shorten the bubble
            lane.f(s0)
            lane.b(s1)
        else:
            lane.fb(s0, s1)
        lane.fb(s1, s0)
    for _ in range(rest):
        lane.b(s1)
        lane.fb(s1, s0)
    split, odd = False, pos % 2 == 1
    for i in range(pos + 1):
        split = split or (i == (pos + 1) // 2 and odd)
        lane.b(s1, split)
        split = split or (i == (pos + 1) // 2 and not odd)
        lane.b(s0, split)
    for _ in range(rest):
        lane.w()
        lane.b(s0, True)
    for _ in range(pos + 1):
        lane.w()
    return lane.acts


def dual_pipe_v(pp: int, m: int) -> list[list[Action]]:
    """DualPipeV (deepseek-ai/DualPipe dualpipe/dualpipev.py; torch 2.13
    ScheduleDualPipeV, schedules.py L3393-3617): 2pp stages in a V, rank r holding stage r
    and 2pp-1-r, each micro-batch passing through both; rank r runs ``_dual_lane`` at
    position r of pp. Needs m >= 2pp."""
    _check(pp, m)
    return [_dual_lane(pp, r, m, r, 2 * pp - 1 - r) for r in range(pp)]


def dual_pipe(pp: int, m: int) -> list[list[Action]]:
    """DualPipe (DeepSeek-V3 report sec. 3.2.1; deepseek-ai/DualPipe dualpipe/dualpipe.py
    L294-422): micro-batches enter from both ends, m/2 in each direction, and every rank
    holds two stage copies - stage r of the forward direction and, as stage 2pp-1-r, the
    reverse direction's stage pp-1-r (Schedule.chains = 2). The two halves of the ranks
    mirror each other; rank r runs ``_dual_lane`` at its position h = min(r, pp-1-r) of
    pp/2, its chunk 0 the direction that enters on its side. Needs pp and m even and
    m >= 2pp."""
    _check(pp, m)
    out = []
    for r in range(pp):
        s0, s1 = (2 * pp - 1 - r, r) if r >= pp // 2 else (r, 2 * pp - 1 - r)
        out.append(_dual_lane(pp // 2, min(r, pp - 1 - r), m // 2, s0, s1))
    return out
