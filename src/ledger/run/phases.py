"""A run as phases: each a number of tokens (or steps) at one sequence length, one global
batch and one placement; a batch-size ramp as Megatron-LM ran it.

Steps of a phase: ceil(tokens / (global batch x sequence length)). A ramp is Megatron's
``--rampup-batch-size START INCREMENT SAMPLES`` (RampupBatchsizeNumMicroBatchesCalculator,
Megatron-LM megatron/core/num_microbatches_calculator.py at 532ad926b4^, L360-470: the
batch starts at START and grows by INCREMENT every SAMPLES / ((GLOBAL - START) /
INCREMENT) samples; BLOOM ran ``192 16 9_765_625``): each batch size of the ramp is a
segment of its own, the rest of the phase runs at the full batch.

>>> ramp = segments(Phase(tokens=12 * 4, global_batch=4, rampup=(2, 2, 4)), 1, 4)
>>> [(s.global_batch, s.steps) for s in ramp]  # 4 ramp samples: 2 steps of 2, then 4s
[(2, 2), (4, 11)]
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.errors import LedgerError

MAX_RAMP_SEGMENTS = 256  # batch sizes one ramp may pass through (each one estimated)
MAX_PHASES = 256  # phases of one run


@dataclass(frozen=True, kw_only=True)
class Phase:
    """One phase of a run. Unset fields take the run's: its model's sequence length, its
    placement's global batch, its placement."""

    name: str = ""
    tokens: float = 0.0  # tokens this phase trains on, or
    steps: int = 0  # its optimizer steps (one of the two)
    seq_len: int | None = None
    global_batch: int | None = None  # sequences per step
    rampup: tuple[int, int, int] | None = None  # Megatron's (start, increment, samples)
    config: object = None  # its own ParallelConfig, or None
    tp_overlap: bool | None = None  # its own TP comm-GEMM overlap, or None: the run's

    def __post_init__(self) -> None:
        if (self.tokens > 0) == (self.steps > 0):
            raise LedgerError(self.label("tokens"), f"give tokens or steps (one, > 0), got "
                                                    f"tokens={self.tokens:g}, steps={self.steps}")
        if self.rampup is not None and self.steps:
            raise LedgerError(self.label("rampup"), "a ramp is counted in samples: give the "
                                                    "phase's tokens, not its steps")

    def label(self, field: str) -> str:
        return f"{self.name}: {field}" if self.name else field


@dataclass(frozen=True)
class Segment:
    """A stretch of a phase at one global batch."""

    phase: Phase
    global_batch: int
    seq_len: int
    steps: int
    tokens: float


def segments(phase: Phase, seq_len: int, global_batch: int) -> list[Segment]:
    """The phase as segments of one batch size each; ``seq_len`` and ``global_batch``
    are the run's, for what the phase leaves unset."""
    seq = phase.seq_len or seq_len
    batch = phase.global_batch or global_batch
    if phase.steps:
        return [Segment(phase, batch, seq, phase.steps, phase.steps * batch * seq)]
    out, samples = [], 0.0
    if phase.rampup is not None:
        out, samples = _ramp(phase, batch, seq)
    rest = phase.tokens - samples * seq
    if rest < 0:
        raise LedgerError(phase.label("tokens"), f"tokens({phase.tokens:,.0f}) end inside "
                                                 f"the ramp of {samples * seq:,.0f} tokens")
    if rest > 0:
        out.append(Segment(phase, batch, seq, math.ceil(rest / (batch * seq)), rest))
    return out


def _ramp(phase: Phase, batch: int, seq: int) -> tuple[list[Segment], float]:
    """Megatron's ramp: the batch sizes, the steps each runs, the samples consumed."""
    start, step, samples = phase.rampup
    if not (0 < start <= batch and step > 0 and samples >= 0):
        raise LedgerError(phase.label("rampup"), f"needs 0 < start({start}) <= global_batch"
                                                 f"({batch}), increment({step}) > 0, samples"
                                                 f"({samples}) >= 0")
    if (batch - start) % step:
        raise LedgerError(phase.label("rampup"), f"global_batch({batch}) - start({start}) "
                                                 f"is not divisible by increment({step})")
    increments = (batch - start) // step
    if increments > MAX_RAMP_SEGMENTS:
        raise LedgerError(phase.label("rampup"), f"{increments:,} batch sizes exceed the "
                                                 f"limit of {MAX_RAMP_SEGMENTS:,}")
    per_increment = samples / increments if increments else 0.0
    out, consumed = [], 0
    for k in range(increments):  # batch start + k*step until consumed reaches (k+1)*per
        size = start + k * step
        n = max(0, math.ceil(((k + 1) * per_increment - consumed) / size))
        if n:
            out.append(Segment(phase, size, seq, n, n * size * seq))
        consumed += n * size
    return out, consumed
