"""ZeRO in eight numbers: all-reduce = reduce-scatter + all-gather.

Rank r's "gradient" is 10r + [0..7]. DDP all-reduces it. ZeRO reduce-scatters it
(rank r keeps the reduced r-th slice), updates only that slice (x0.5 stands in for
the optimizer), and all-gathers the updated slices back. Same bytes, and the slice
is all a ZeRO-2 rank ever needs to keep.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ledger.config import ParallelConfig
from ledger.placement import dp_group_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, fmt_list, handed_check, wire_row

ELEMENTS = 8
WIRE_ELEMENTS = 32768  # the same three calls at 128 KiB: gloo's framing < 1% of the wire
KINDS = ("all_reduce", "reduce_scatter", "all_gather")


def _collectives(ctx: Ctx, grad, tags):
    """DDP's all-reduce; ZeRO's reduce-scatter, x0.5 on the own slice, all-gather."""
    k = grad.numel() // ctx.world
    with ctx.metering(tags[0]):
        summed = grad.clone()
        dist.all_reduce(summed)  # DDP: each rank sends 2(n-1)/n x |grad|
    with ctx.metering(tags[1]):
        shard = ctx.t(torch.empty(k))
        dist.reduce_scatter_single(shard, grad.clone())  # ZeRO: (n-1)/n x |grad|
    reduced = shard.clone()
    shard *= 0.5  # this rank's "optimizer step" on its own slice
    with ctx.metering(tags[2]):
        gathered = ctx.t(torch.empty(grad.numel()))
        dist.all_gather_single(gathered, shard)  # ZeRO: (n-1)/n x |grad|
    return summed, reduced, gathered


def run(ctx: Ctx) -> ToyReport | None:
    n, r = ctx.world, ctx.rank
    grad = ctx.t(torch.arange(ELEMENTS, dtype=torch.float32) + 10 * r)
    k = ELEMENTS // n
    summed, reduced, gathered = _collectives(ctx, grad, ("zero",) * 3)
    mine = torch.equal(reduced, summed[r * k:(r + 1) * k])
    same = torch.equal(gathered, 0.5 * summed)
    calls = [(c.kind, c.ring) for c in ctx.meter.calls if c.tag == "zero"]
    tags = tuple(f"zero wire {kind}" for kind in KINDS)
    _collectives(ctx, ctx.t(torch.randn(WIRE_ELEMENTS)), tags)
    wire = {kind: (sum(c.ring for c in ctx.meter.calls if c.tag == t), ctx.wire(t))
            for kind, t in zip(KINDS, tags)}
    got = ctx.gather((mine, same, reduced.cpu().tolist(), calls, wire))
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


def _ledger(n: int, grad_bytes: int) -> dict[str, float]:
    ddp = dp_group_comms(ParallelConfig(dp=n), grad_bytes, grad_bytes, n, 1, ("-", "-"), "")
    zero = dp_group_comms(ParallelConfig(dp=n, zero_stage=1), grad_bytes, grad_bytes, n, 1,
                          ("-", "-"), "")
    return {c.kind: c.bytes for c in ddp + zero if c.bytes > 0}


def _bytes(rep: ToyReport, n: int, got: list) -> None:
    """Ring-model bytes of the real calls against the ledger's DP/ZeRO rows for a
    32-byte gradient (the gradient shard is what ZeRO passes); then the same calls at
    128 KiB, on the wire."""
    predicted = _ledger(n, ELEMENTS * 4)
    for kind in KINDS:
        measured = [sum(b for k, b in g[3] if k == kind) for g in got]
        rep.bytes.append(ByteRow(kind, measured, [predicted[kind]] * n))
        handed_check(rep, rep.bytes[-1])
    big = _ledger(n, WIRE_ELEMENTS * 4)
    for kind in KINDS:
        note = ("gloo runs reduce-scatter as an all-reduce plus a local copy: its wire "
                "carries the all-reduce's bytes" if kind == "reduce_scatter" else "")
        row = ByteRow(f"{kind} at {WIRE_ELEMENTS * 4 // 1024} KiB",
                      [g[4][kind][0] for g in got], [big[kind]] * n, note)
        rep.bytes.append(row)
        wire_row(rep, row, [g[4][kind][1] for g in got], kind)
    ar, rs, ag = (rep.bytes[3 + i].wire for i in range(3))
    rep.check("on the wire, AG = AR / 2 (the ring's second half) and gloo's RS = AR (1%)",
              all(abs(2 * g - a) <= 0.01 * a and abs(s_ - a) <= 0.01 * a
                  for a, s_, g in zip(ar, rs, ag)))
