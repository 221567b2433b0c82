"""ZeRO in eight numbers: all-reduce = reduce-scatter + all-gather.

Rank r's "gradient" is 10r + [0..7]. DDP all-reduces it. ZeRO reduce-scatters it
(rank r keeps the reduced r-th slice), updates only that slice (x0.5 stands in for
the optimizer), and all-gathers the updated slices back. Same bytes, and the slice
is all a ZeRO-2 rank ever needs to keep.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ledger.parallel import ParallelConfig, dp_group_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, fmt_list

ELEMENTS = 8


def run(ctx: Ctx) -> ToyReport | None:
    n, r = ctx.world, ctx.rank
    grad = ctx.t(torch.arange(ELEMENTS, dtype=torch.float32) + 10 * r)
    k = ELEMENTS // n
    with ctx.metering("zero"):
        summed = grad.clone()
        dist.all_reduce(summed)  # DDP: each rank sends 2(n-1)/n x 32 B
        shard = ctx.t(torch.empty(k))
        dist.reduce_scatter_single(shard, grad.clone())  # ZeRO: (n-1)/n x 32 B
        reduced = shard.clone()
        shard *= 0.5  # this rank's "optimizer step" on its own slice
        gathered = ctx.t(torch.empty(ELEMENTS))
        dist.all_gather_single(gathered, shard)  # ZeRO: (n-1)/n x 32 B
    mine = torch.equal(reduced, summed[r * k:(r + 1) * k])
    same = torch.equal(gathered, 0.5 * summed)
    calls = [(c.kind, c.ring) for c in ctx.meter.calls if c.tag == "zero"]
    got = ctx.gather((mine, same, reduced.cpu().tolist(), calls))
    if got is None:
        return None
    rep = ToyReport("zero")
    rep.values = {"all_reduce": summed.cpu().tolist(), "rank0_shard": got[0][2],
                  "all_gather_half": gathered.cpu().tolist()}
    rep.lines = [
        f"all-reduce             : {fmt_list(summed)}",
        f"reduce-scatter, rank 0 : {fmt_list(got[0][2])}  <- the first {k} of the all-reduce",
        f"all-gather of 0.5 x    : {fmt_list(gathered)}",
        f"RS + AG == AR x 0.5 ?  : {all(g[1] for g in got)}",
    ]
    rep.check("each rank's reduce-scatter slice is its slice of the all-reduce",
              all(g[0] for g in got))
    rep.check("all-gather of the halved slices equals 0.5 x all-reduce", all(g[1] for g in got))
    _bytes(rep, n, got)
    return rep


def _bytes(rep: ToyReport, n: int, got: list) -> None:
    """Ring-model bytes of the real calls against the ledger's DP/ZeRO rows for a
    32-byte gradient (the gradient shard is what ZeRO passes)."""
    grad_bytes = ELEMENTS * 4
    ddp = dp_group_comms(ParallelConfig(dp=n), grad_bytes, grad_bytes, n, 1, ("-", "-"), "")
    zero = dp_group_comms(ParallelConfig(dp=n, zero_stage=1), grad_bytes, grad_bytes, n, 1,
                          ("-", "-"), "")
    predicted = {c.kind: c.bytes for c in ddp + zero if c.bytes > 0}
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        measured = [sum(b for k, b in g[3] if k == kind) for g in got]
        note = ("gloo runs reduce-scatter as an all-reduce plus a local copy: on its wire it "
                "moves the all-reduce's bytes" if kind == "reduce_scatter" else "")
        rep.bytes.append(ByteRow(kind, measured, [predicted[kind]] * n, note))
    rep.check("RS + AG bytes == AR bytes (ring model)",
              rep.bytes[1].measured[0] + rep.bytes[2].measured[0] == rep.bytes[0].measured[0])
