"""Megatron's f and g on a 2x2 MLP you can check by hand.

X = [1, 2]; A = [[1, 2], [3, 4]] split by columns; B = [[1, 0], [0, 2]] split by rows;
ReLU between. Ranks (2i, 2i+1) form TP group i: world/2 groups side by side (data
parallel replicas), each checked. f is identity forward and all-reduce backward; g is
all-reduce forward and identity backward (Megatron's _CopyToModelParallelRegion /
_ReduceFromModelParallelRegion). The same block then runs on WIRE_TOKENS tokens, so its
all-reduces are large enough for the kernel's byte count to check the ring's factor.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ledger.config import ParallelConfig
from ledger.placement import tp_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, handed_check, max_err, wire_row

X = [[1.0, 2.0]]
A = [[1.0, 2.0], [3.0, 4.0]]
B = [[1.0, 0.0], [0.0, 2.0]]
TP = 2
WIRE_TOKENS = 16384  # 128 KiB per all-reduce: gloo framing < 1% of the wire


class CopyToTP(torch.autograd.Function):
    """f: forward identity (X is whole on every rank); backward sums dX's partials."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)  # 2(t-1)/t x |dX| bytes
        return grad, None


class ReduceFromTP(torch.autograd.Function):
    """g: forward sums the row-parallel partial outputs; backward identity."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)  # 2(t-1)/t x |Z| bytes
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _reference():
    x = torch.tensor(X, requires_grad=True)
    a = torch.tensor(A, requires_grad=True)
    b = torch.tensor(B, requires_grad=True)
    z = torch.relu(x @ a) @ b
    z.sum().backward()
    return z.detach(), x.grad, a.grad, b.grad


def _block(ctx: Ctx, group, x_rows, tag):
    t = ctx.rank % TP
    x = ctx.t(x_rows).requires_grad_()
    a_t = ctx.t(A)[:, t:t + 1].clone().requires_grad_()  # column t of A
    b_t = ctx.t(B)[t:t + 1, :].clone().requires_grad_()  # row t of B
    with ctx.metering(tag):
        y = torch.relu(CopyToTP.apply(x, group) @ a_t)
        z_part = y @ b_t
        z = ReduceFromTP.apply(z_part, group)
        z.sum().backward()
    return {k: v.detach().cpu() for k, v in (("y", y), ("z_part", z_part), ("z", z),
                                             ("dx", x.grad), ("da", a_t.grad),
                                             ("db", b_t.grad))}


def run(ctx: Ctx) -> ToyReport | None:
    groups = [dist.new_group([i, i + 1]) for i in range(0, ctx.world, TP)]  # all ranks
    group = groups[ctx.rank // TP]  # take part in every new_group
    row = _block(ctx, group, X, "tp")
    row["calls"] = [c.ring for c in ctx.meter.calls if c.tag == "tp"]
    g = torch.Generator().manual_seed(0)
    _block(ctx, group, torch.randn(WIRE_TOKENS, 2, generator=g), "tp wire")
    row["wire"] = (sum(c.ring for c in ctx.meter.calls if c.tag == "tp wire"),
                   ctx.wire("tp wire"))
    got = ctx.gather(row)
    if got is None:
        return None
    return _report(got)


def _report(rows) -> ToyReport:
    z, dx, da, db = _reference()
    r0, r1 = rows[:TP]
    pairs = [rows[i:i + TP] for i in range(0, len(rows), TP)]
    rep = ToyReport("tp")
    ls = lambda t: str(t.tolist())  # noqa: E731
    rep.lines = [
        f"forward   rank 0: Y_0 = {ls(r0['y'])}  Z_0 = Y_0 B_0 = {ls(r0['z_part'])}",
        f"          rank 1: Y_1 = {ls(r1['y'])}  Z_1 = Y_1 B_1 = {ls(r1['z_part'])}",
        f"          g all-reduce -> Z = {ls(r0['z'])}   one process: {ls(z)}",
        f"backward  dB_0 = {ls(r0['db'])}  dB_1 = {ls(r1['db'])}   one process: {ls(db)} (rows)",
        f"          dA_0 = {ls(r0['da'])}  dA_1 = {ls(r1['da'])}   one process: {ls(da)} (columns)",
        f"          f all-reduce -> dX = {ls(r0['dx'])}   one process: {ls(dx)}",
    ]
    rep.values = {"y": [r["y"].tolist() for r in rows], "z": r0["z"].tolist(),
                  "dx": r0["dx"].tolist()}
    rep.lines.append(f"({len(pairs)} TP group(s) of {TP}: ranks "
                     + ", ".join(f"{2 * i}-{2 * i + 1}" for i in range(len(pairs))) + ")")
    rep.check("Z equals one process on every rank", all(max_err(r["z"], z) == 0 for r in rows))
    rep.check("dB rows and dA columns are one process's, with no communication",
              all(max_err(torch.cat([p[0]["db"], p[1]["db"]], 0), db) == 0
                  and max_err(torch.cat([p[0]["da"], p[1]["da"]], 1), da) == 0 for p in pairs))
    rep.check("dX after f's all-reduce equals one process",
              all(max_err(r["dx"], dx) == 0 for r in rows))
    # one MLP block is half a transformer layer: 1 all-reduce forward, 1 backward
    s_act = len(X) * len(X[0]) * 4  # tokens x h x fp32 bytes
    predicted = sum(c.bytes for c in tp_comms(ParallelConfig(tp=TP, sequence_parallel=False,
                                                             act_bytes=4), s_act, 0.5, "-"))
    n = len(rows)
    rep.bytes.append(ByteRow("all_reduce", [sum(r["calls"]) for r in rows],
                             [predicted] * n, "activation-sized: one forward (g), one "
                             "backward (f) per MLP block"))
    handed_check(rep, rep.bytes[-1])
    big = sum(c.bytes for c in tp_comms(ParallelConfig(tp=TP, sequence_parallel=False,
                                                       act_bytes=4),
                                        WIRE_TOKENS * len(X[0]) * 4, 0.5, "-"))
    row = ByteRow(f"all_reduce at {WIRE_TOKENS} tokens", [r["wire"][0] for r in rows],
                  [big] * n)
    rep.bytes.append(row)
    wire_row(rep, row, [r["wire"][1] for r in rows], "all_reduce")
    return rep
