"""How far the start-up verdict rests on vLLM's CUDA-graph estimate.

vLLM measures that estimate at start-up (``ledger.serve.graphs``); the ledger models it
with two fitted constants, and the logged estimates have fallen from that model by the
factors ``graphs.SPREAD`` (each row against the fit of the others). ``margin`` reprices the
pool at both ends of that spread, everything else the same, and finds the largest estimate
with which every worker still holds one request: where that lies inside the spread, the
verdict (starts or not) is within the estimate's uncertainty, not settled by the ledger.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.serve.graphs import SPREAD
from ledger.serve.paging import pool


@dataclass(frozen=True)
class GraphMargin:
    """The pool at both ends of the CUDA-graph estimate's logged spread."""

    low_bytes: float  # the modelled estimate x SPREAD[0]
    high_bytes: float  # the modelled estimate x SPREAD[1]
    threshold_bytes: float  # the largest estimate with which the engine still starts
    sequences_low: int  # max sequences with the low estimate (0: it does not start)
    sequences_high: int  # ... with the high one

    @property
    def settled(self) -> bool:
        """The verdict is the same at both ends of the spread."""
        return (self.low_bytes <= self.threshold_bytes) == \
            (self.high_bytes <= self.threshold_bytes)


def margin(caches, workers, budgets, max_model_len: int, eng, kv_pool) -> GraphMargin | None:
    """The margin of ``kv_pool`` (priced over ``budgets``) on the modelled CUDA-graph
    estimate; None where no estimate is modelled (given, --enforce-eager,
    --kv-cache-memory-bytes)."""
    if any(b.graphs is None or b.given_bytes is not None for b in budgets):
        return None
    modelled = budgets[0].cudagraph_bytes
    # every worker's memory before the estimate, less what one request needs there
    room = min(b.available_bytes + b.cudagraph_bytes - need
               for b, need in zip(budgets, kv_pool.worker_need_bytes))
    ends = []
    for factor in SPREAD:
        g = modelled * factor
        p = pool(caches, workers, [b.available_bytes + b.cudagraph_bytes - g for b in budgets],
                 max_model_len, eng)
        ends.append((g, 0 if p.short is not None else int(p.max_concurrency)))
    (low, seq_low), (high, seq_high) = ends
    return GraphMargin(low, high, room, seq_low, seq_high)
