"""One row of the memory validation (``ledger.validation.memory``): a published run, its
settings, what was measured and how (``METRICS``; the definitions are memory.py's)."""
from __future__ import annotations

from dataclasses import dataclass

from ledger.config import ParallelConfig
from ledger.model import ModelSpec

GiB = 2**30
METRICS = ("reserved", "allocated", "max-alloc", "resident", "outcome")


@dataclass(frozen=True)
class Peak:
    """One measured run: its settings, what was measured and how (``metric``)."""

    source: str
    label: str
    model: ModelSpec
    cfg: ParallelConfig
    gpu: str  # the GPU preset; the platform the source names where no capacity is needed
    metric: str  # METRICS
    measured: float  # bytes, or 1.0 (ran) / 0.0 (out of memory) for "outcome"
    role: str = "prediction"  # "calibration": the fragmentation is fitted on it; "bound":
    #   an outcome row that bounds the unreturnable share (ledger.validation.outcomes);
    #   "chosen": a reading of the source picked with the row's priced figure in view -
    #   printed, in no calibration or prediction figure
    note: str = ""


__all__ = ["GiB", "METRICS", "Peak"]
