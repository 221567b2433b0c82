"""Pipeline schedules as data: for each PP rank, the ordered list of its actions.

An action is a forward (F) or backward (B) of one micro-batch on one stage. The toys
execute these lists over real send/recv; the ledger measures bubbles and in-flight
activations by simulating them.

>>> [str(a) for a in one_f_one_b(4, 8)[3][:4]]
['F0', 'B0', 'F1', 'B1']
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError, require_positive


@dataclass(frozen=True)
class Action:
    kind: str  # "F" forward, "B" backward (input and weight gradients together)
    mb: int  # micro-batch
    stage: int  # stage (virtual stage when interleaved)

    def __str__(self) -> str:
        return f"{self.kind}{self.mb}"


def _check(pp: int, m: int) -> None:
    require_positive("pp", pp)
    require_positive("num_microbatches", m)


def gpipe(pp: int, m: int) -> list[list[Action]]:
    """All forwards, then all backwards (Huang et al. 2019)."""
    _check(pp, m)
    return [[Action("F", i, r) for i in range(m)] + [Action("B", i, r) for i in range(m)]
            for r in range(pp)]


def one_f_one_b(pp: int, m: int) -> list[list[Action]]:
    """1F1B / PipeDream-Flush (Narayanan et al. 2021): rank r runs min(pp-r-1, m) warm-up
    forwards, then alternates one forward and one backward, then drains."""
    _check(pp, m)
    out = []
    for r in range(pp):
        warm = min(pp - r - 1, m)
        acts = [Action("F", i, r) for i in range(warm)]
        for i in range(m - warm):
            acts += [Action("F", warm + i, r), Action("B", i, r)]
        acts += [Action("B", i, r) for i in range(m - warm, m)]
        out.append(acts)
    return out


def peak_inflight(actions: list[Action]) -> int:
    """Most micro-batches whose activations one rank holds at once (F adds, B frees)."""
    held = peak = 0
    for a in actions:
        held += 1 if a.kind == "F" else -1 if a.kind == "B" else 0
        peak = max(peak, held)
    return peak


SCHEDULES = {"gpipe": gpipe, "1f1b": one_f_one_b}


def schedule(kind: str, pp: int, m: int) -> list[list[Action]]:
    if kind not in SCHEDULES:
        raise LedgerError("schedule", f"unknown schedule {kind!r}; known: "
                                      f"{', '.join(SCHEDULES)}")
    return SCHEDULES[kind](pp, m)
