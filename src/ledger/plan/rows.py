"""The planner's grid rows by integer codes: the distinct values of a code column, rows
grouped by a key, one code per categorical combination (``ledger.plan.search`` and
``grid_memory`` price each group once)."""
from __future__ import annotations

import numpy as np


def present(codes) -> np.ndarray:
    """The distinct values of small non-negative integer ``codes``, in order:
    ``np.unique``'s answer without its sort (and without numpy 2.4's import of numpy.ma
    there, 20-30 ms of a cold plan)."""
    return np.flatnonzero(np.bincount(np.asarray(codes).reshape(-1)))


def groups(key: np.ndarray):
    """Rows grouped by an integer key: (unique keys, row indices per group)."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    return sorted_key[starts], [order[s:e] for s, e in zip(starts, ends)]


def codes(g) -> np.ndarray:
    """One integer per categorical combination (schedule, zero, sp, cp kind, TP overlap,
    offload, recompute)."""
    return (((((g["sched"] * 4 + g["zero"]) * 2 + g["sp"]) * 2 + g["ulysses"]) * 2
             + g["tpov"]) * 3 + g["offload"]) * 3 + g["rc"]
