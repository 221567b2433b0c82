"""A pipeline schedule as data: the actions one rank runs, and the per-rank lists with
the facts a simulator needs (stages per rank, which rank holds a stage, how micro-batches
enter)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    kind: str  # "F" forward, "B" full backward, "I" input-gradient, "W" weight-gradient,
    # "FB" a forward (mb, stage) overlapped with a full backward (mb2, stage2)
    mb: int  # micro-batch
    stage: int  # pipeline stage (a virtual stage when a rank holds several)
    mb2: int = -1  # FB: the backward's micro-batch
    stage2: int = -1  # FB: the backward's stage

    def __str__(self) -> str:
        return f"F{self.mb}B{self.mb2}" if self.kind == "FB" else f"{self.kind}{self.mb}"

    def parts(self) -> tuple[Action, ...]:
        """The passes this action runs: itself, or an FB's forward and backward."""
        if self.kind != "FB":
            return (self,)
        return Action("F", self.mb, self.stage), Action("B", self.mb2, self.stage2)


@dataclass(frozen=True)
class Schedule:
    """Per-rank action lists plus the facts a simulator needs to run them."""

    name: str
    pp: int
    m: int
    v: int  # stages per rank
    ranks: list[list[Action]]
    shape: str = "loop"  # "loop": stage s on rank s % pp; "v": rank r holds r and 2pp-1-r
    chains: int = 1  # 2 for DualPipe: micro-batches enter at both ends, each stage copy
    #                  holds a direction's pass (stages 0..pp-1 forward, pp..2pp-1 reverse)

    @property
    def stages(self) -> int:
        return self.pp * self.v

    @property
    def chain(self) -> int:
        """Stages one micro-batch passes through."""
        return self.stages // self.chains

    @property
    def visits(self) -> int:
        """Stages of one rank one micro-batch passes through: the rank's share of one
        micro-batch's work is split over these (DualPipe: one, the direction's copy)."""
        return self.v // self.chains

    def rank_of(self, stage: int) -> int:
        if self.shape == "v":
            return stage if stage < self.pp else 2 * self.pp - 1 - stage
        return stage % self.pp
