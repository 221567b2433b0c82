"""What gloo itself puts on the wire for each collective ProcessGroupGloo runs on CPU.

Read from gloo's sources (github.com/pytorch/gloo at 70dc360, April 2026) and confirmed
byte for byte with the kernel meter (``ledger.toys.wire``) on torch 2.13:

- all_reduce: ``gloo::allreduce`` with the default algorithm is the ring
  (gloo/allreduce.cc: ``case UNSPECIFIED: case RING: ring(...)``). The buffer is cut into
  ``numSegments = roundUp(max(ceil(S / 1 MiB), 2n), n)`` segments; a reduce-scatter phase
  and an all-gather phase each send ``numSegments - numSegments / n`` of them to the
  next rank. 2(n-1)/n x S per rank, as the ledger's ring.
- reduce_scatter: ProcessGroupGloo has no reduce-scatter work (its profiling names are
  gloo:all_reduce, all_gather, all_to_all, broadcast, ... and no reduce_scatter); the
  tensor reduce-scatter runs an all-reduce of the whole input and keeps a slice, so its
  wire carries 2(n-1)/n x S, twice the ring's (n-1)/n x S.
- all_gather: ring (gloo/allgather.cc): n-1 steps, each rank's block sent as two
  halves, so 2(n-1) messages and (n-1)/n x S per rank, as the ledger's ring.
- all_to_all / all_to_all with splits: direct (gloo/alltoall.cc, alltoallv.cc): one
  message to every other rank, empty ones included; the bytes are the rows that leave.
- send / recv: one message; the receiver writes only its ready notification.
- broadcast: binomial tree (gloo/broadcast.cc); the ledger prices no broadcast.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_SEGMENT_BYTES = 1024 * 1024  # gloo/allreduce.h: kMaxSegmentSize


@dataclass(frozen=True)
class Traffic:
    """Payload bytes one rank writes for one operation, and its message counts."""

    payload_bytes: int
    sends: int
    recvs: int

    def __add__(self, o: "Traffic") -> "Traffic":
        return Traffic(payload_bytes=self.payload_bytes + o.payload_bytes,
                       sends=self.sends + o.sends, recvs=self.recvs + o.recvs)


NONE = Traffic(payload_bytes=0, sends=0, recvs=0)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def all_reduce(n: int, rank: int, total_bytes: int, elem_bytes: int) -> Traffic:
    """gloo's ring all-reduce, segment by segment (gloo/allreduce.cc, ``ring``)."""
    if n == 1 or total_bytes == 0:
        return NONE
    max_seg = elem_bytes * max(1, MAX_SEGMENT_BYTES // elem_bytes)
    segments = _round_up(max(-(-total_bytes // max_seg), 2 * n), n)
    per_rank = segments // n
    seg = _round_up(-(-total_bytes // segments), elem_bytes)
    span = segments * seg
    payload = sends = recvs = 0
    # (send start, recv start) in segments: reduce-scatter, then all-gather
    for send0, recv0 in (((rank + 1) * per_rank, (rank + 2) * per_rank),
                         (rank * per_rank, (rank + 1) * per_rank)):
        for i in range(segments - per_rank):
            s_len = min(seg, total_bytes - ((send0 + i) * seg) % span)
            r_len = min(seg, total_bytes - ((recv0 + i) * seg) % span)
            if s_len > 0:
                payload, sends = payload + s_len, sends + 1
            if r_len > 0:
                recvs += 1
    return Traffic(payload_bytes=payload, sends=sends, recvs=recvs)


def reduce_scatter(n: int, rank: int, input_bytes: int, elem_bytes: int) -> Traffic:
    """ProcessGroupGloo: an all-reduce of the whole input, then a local slice."""
    return all_reduce(n, rank, input_bytes, elem_bytes)


def all_gather(n: int, output_bytes: int) -> Traffic:
    """gloo's ring all-gather: n-1 steps of two half-blocks (gloo/allgather.cc)."""
    if n == 1 or output_bytes == 0:
        return NONE
    return Traffic(payload_bytes=output_bytes // n * (n - 1), sends=2 * (n - 1),
                   recvs=2 * (n - 1))


def all_to_all(n: int, rank: int, send_bytes: list[int]) -> Traffic:
    """Direct: one message to every other rank, empty or not (gloo/alltoallv.cc)."""
    off = sum(b for j, b in enumerate(send_bytes) if j != rank)
    return Traffic(payload_bytes=off, sends=n - 1, recvs=n - 1)


def send(nbytes: int) -> Traffic:
    return Traffic(payload_bytes=nbytes, sends=1, recvs=0)


def recv() -> Traffic:
    return Traffic(payload_bytes=0, sends=0, recvs=1)
