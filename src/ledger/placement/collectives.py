"""Bytes each rank sends for one collective, in the bandwidth-optimal (ring) model.

The payload convention ``S`` follows the seed and NCCL's own accounting:
all_reduce -> the per-rank buffer; all_gather / reduce_scatter / all_to_all -> the
total (concatenated) size; send_recv -> the message. On a full-duplex link every rank
receives as many bytes as it sends.

>>> coll_bytes("all_reduce", 4, 100.0)
150.0
>>> coll_bytes("reduce_scatter", 4, 100.0) + coll_bytes("all_gather", 4, 100.0)
150.0
"""
from __future__ import annotations

import numpy as np

from ledger.errors import LedgerError

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


def coll_bytes(kind: str, n: int, S: float) -> float:  # noqa: N803 (the seed's name)
    """Bytes one of ``n`` ranks sends for a collective over payload ``S`` bytes.

    all_reduce is a reduce_scatter followed by an all_gather: 2(n-1)/n * S. The
    other three collectives move (n-1)/n of the payload; a point-to-point send
    moves the message itself. One rank alone sends nothing.
    """
    if kind not in KINDS:
        raise LedgerError("kind", f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    if n < 1:
        raise LedgerError("n", f"group size must be a positive integer, got {n!r}")
    if S < 0:
        raise LedgerError("S", f"payload must be >= 0 bytes, got {S!r}")
    return float(ring_bytes(kind, n, S))


def ring_bytes(kind: str, n, S):
    """``coll_bytes`` without the checks, for numbers or numpy arrays alike (the planner
    prices a whole grid of placements at once); one rank alone sends nothing."""
    if kind == "send_recv":
        return S * 1.0
    return (2 if kind == "all_reduce" else 1) * (n - 1) / n * S


def ring_payload(kind: str, n, wire):
    """The payload S a ``kind`` call over ``n`` ranks reduces or gathers, from the bytes
    each rank sends (``ring_bytes`` inverted); a rank alone sends nothing, its bytes
    stand as they are."""
    n = np.asarray(n, dtype=float)
    share = np.where(n > 1, (n - 1) / np.maximum(n, 1), 1.0)
    return wire / share / (2 if kind == "all_reduce" else 1)
