"""Expert parallelism: route, dispatch all-to-all, local experts with a capacity, combine.

8 experts, top-2, 16 tokens of width 4 per rank, one random router shared by every
rank; rank r holds experts 2r and 2r+1 (with 4 ranks). Each expert takes at most
C = ceil(CF x all tokens x k / E) rows (CF 1.25, GShard's capacity); rows past C - in
arrival order, which is source rank, then token, then choice - are dropped: the expert
leaves them at zero, so that copy adds nothing to its token. The all-to-all is an
autograd function whose backward is the all-to-all with the splits swapped. The
reference is one process looping over every token in that order, counting each
expert's rows itself. The same code then routes WIRE_TOKENS tokens per rank so the
kernel's byte count can check the all-to-all's bytes on the wire.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.placement import ep_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, max_err, wire_row

EXPERTS, TOPK, TOKENS, HIDDEN, CAPACITY_FACTOR, SEED = 8, 2, 16, 4, 1.25, 0
WIRE_TOKENS, WIRE_HIDDEN = 1024, 32  # 256 KiB per all-to-all: framing < 1% of the wire
ROUTING_TOLERANCE = 0.05  # the busiest rank's home rows vs the ledger's 1/n


class AllToAll(torch.autograd.Function):
    """Rows go to ranks by ``in_splits``; the gradient comes back by the same route."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits):
        ctx.splits = (in_splits, out_splits)
        out = x.new_empty(sum(out_splits), x.shape[1])
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad):
        in_splits, out_splits = ctx.splits
        back = grad.new_empty(sum(in_splits), grad.shape[1])
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits)  # swapped
        return back, None, None


def capacity(n: int, tokens: int) -> int:
    return math.ceil(CAPACITY_FACTOR * n * tokens * TOPK / EXPERTS)


def keep_mask(expert_ids: torch.Tensor, first: int, count: int, cap: int) -> torch.Tensor:
    """Which arrived rows their expert takes: each expert's first ``cap`` rows."""
    onehot = F.one_hot(expert_ids - first, count)
    return ((onehot.cumsum(0) * onehot).sum(1) - 1) < cap


def _data(n: int, tokens: int = TOKENS, hidden: int = HIDDEN):
    g = torch.Generator().manual_seed(SEED)
    router = torch.randn(hidden, EXPERTS, generator=g)
    experts = torch.randn(EXPERTS, hidden, hidden, generator=g) * 0.5
    x = torch.randn(n * tokens, hidden, generator=g)
    upstream = torch.randn(n * tokens, hidden, generator=g)  # dLoss/dout
    return router, experts, x, upstream


def _route(x, router):
    weight, expert = torch.softmax(x @ router, 1).topk(TOPK, 1)
    return x.repeat_interleave(TOPK, 0), expert.reshape(-1), weight.reshape(-1)


def _combine(flat_w, y):
    return (flat_w[:, None] * y).reshape(-1, TOPK, y.shape[1]).sum(1)


def _reference(x, router, experts, upstream, cap):
    """One process, every token of every rank in arrival order, one row at a time."""
    w = experts.clone().requires_grad_()
    x = x.clone().requires_grad_()
    flat_x, flat_e, flat_w = _route(x, router)
    taken, kept, ys = [0] * EXPERTS, [], []
    for i, e in enumerate(flat_e.tolist()):
        taken[e] += 1
        kept.append(taken[e] <= cap)
        ys.append(torch.tanh(flat_x[i] @ w[e]) if kept[-1] else flat_x.new_zeros(x.shape[1]))
    out = _combine(flat_w, torch.stack(ys))
    (out * upstream).sum().backward()
    return out.detach(), w.grad, x.grad, kept


def _moe(ctx: Ctx, tokens: int, hidden: int, tag: str):
    """This rank's part of one MoE layer, forward and backward."""
    n, r = ctx.world, ctx.rank
    per_rank = EXPERTS // n
    router, experts, x_all, up_all = _data(n, tokens, hidden)
    mine = slice(r * tokens, (r + 1) * tokens)
    w_local = ctx.t(experts[r * per_rank:(r + 1) * per_rank]).requires_grad_()
    x_dev = ctx.t(x_all[mine]).requires_grad_()  # tokens come from earlier layers
    flat_x, flat_e, flat_w = _route(x_dev, ctx.t(router))
    dst = flat_e // per_rank  # the rank that holds each routed copy's expert
    order = torch.argsort(dst, stable=True)  # grouped by destination rank
    send_l = torch.bincount(dst, minlength=n).tolist()
    with ctx.metering(tag + " routing"):  # how many rows each rank will receive, for whom
        recv = torch.empty(n, dtype=torch.int64)
        dist.all_to_all_single(recv, torch.tensor(send_l))
        recv_l = recv.tolist()
        recv_e = flat_e.new_empty(sum(recv_l))
        dist.all_to_all_single(recv_e, flat_e[order], recv_l, send_l)
    keep = keep_mask(recv_e, r * per_rank, per_rank, capacity(n, tokens))
    with ctx.metering(tag):
        xin = AllToAll.apply(flat_x[order], recv_l, send_l)  # dispatch: T*k*h*4 B
        yout = xin.new_zeros(xin.shape)
        for j in range(per_rank):  # each local expert on the rows it takes
            sel = (recv_e == r * per_rank + j) & keep
            yout[sel] = torch.tanh(xin[sel] @ w_local[j])
        yback = AllToAll.apply(yout, send_l, recv_l)  # combine: the swapped route
        out = _combine(flat_w, yback[torch.argsort(order)])
        (out * ctx.t(up_all[mine])).sum().backward()
    with ctx.metering(tag + " routing"):  # tell each token's rank which copies were taken
        kept = keep.new_empty(sum(send_l))
        dist.all_to_all_single(kept, keep, send_l, recv_l)
    return (out, w_local.grad, x_dev.grad, kept[torch.argsort(order)], send_l, flat_e,
            sum(recv_l))


def run(ctx: Ctx) -> ToyReport | None:
    n, r = ctx.world, ctx.rank
    per_rank = EXPERTS // n
    out, w_grad, x_grad, kept, send_l, flat_e, _ = _moe(ctx, TOKENS, HIDDEN, "tokens")
    router, experts, x_all, up_all = _data(n)
    ref_out, ref_w, ref_x, ref_kept = _reference(x_all, router, experts, up_all,
                                                 capacity(n, TOKENS))
    mine = slice(r * TOKENS, (r + 1) * TOKENS)
    err_f = max_err(out, ref_out[mine])
    err_g = max(max_err(w_grad, ref_w[r * per_rank:(r + 1) * per_rank]),
                max_err(x_grad, ref_x[mine]))
    same_drops = kept.tolist() == ref_kept[r * TOKENS * TOPK:(r + 1) * TOKENS * TOPK]
    calls = [(c.payload, c.off_rank) for c in ctx.meter.calls if c.tag == "tokens"]
    *_, loads = _moe(ctx, WIRE_TOKENS, WIRE_HIDDEN, "wire")
    f = ctx.meter.framing
    wire = [(c.ring, None if f is None else c.wire - f.of(c.traffic.sends, c.traffic.recvs),
             c.traffic.payload_bytes) for c in ctx.meter.calls if c.tag == "wire"]
    got = ctx.gather((send_l, flat_e.cpu().tolist(), err_f, err_g, calls, kept.tolist(),
                      same_drops, wire, loads))
    return None if got is None else _report(n, got)


def _report(n: int, got: list) -> ToyReport:
    matrix = [g[0] for g in got]
    received = [sum(row[j] for row in matrix) for j in range(n)]
    mean = sum(received) / n
    rho = max(received) / mean
    per_expert = [sum(e == k for g in got for e in g[1]) for k in range(EXPERTS)]
    cap = capacity(n, TOKENS)
    dropped = [sum(not k for k in g[5]) for g in got]
    rep = ToyReport("ep")
    rep.lines = ["dispatch matrix: row i = rows rank i sends to ranks 0..n-1"]
    rep.lines += [f"  rank {i}: {row}   total {sum(row)}" for i, row in enumerate(matrix)]
    rep.lines += [
        f"rows received per rank: {received}   mean {mean:g}, max / mean = rho = {rho:.2f}",
        f"rows per expert: {per_expert}; capacity C = ceil({CAPACITY_FACTOR} x {n * TOKENS}"
        f" x {TOPK} / {EXPERTS}) = {cap}; copies dropped, by token's rank: {dropped}",
        "forward error against one process looping over tokens: "
        + str([f"{g[2]:.1e}" for g in got]),
        "expert and token gradient error against it: " + str([f"{g[3]:.1e}" for g in got]),
    ]
    rep.values = {"matrix": matrix, "received": received, "rho": rho,
                  "per_expert": per_expert, "capacity": cap,
                  "experts": [g[1] for g in got], "kept": [g[5] for g in got]}
    rep.check("the copies each expert dropped are the reference loop's",
              all(g[6] for g in got))
    rep.check("forward with drops equals the reference (<= 1e-6)",
              all(g[2] <= 1e-6 for g in got))
    rep.check("expert and token gradients equal the reference (<= 1e-5)",
              all(g[3] <= 1e-5 for g in got))
    _bytes(rep, n, got)
    return rep


def _ledger_pass(n: int, tokens: int, hidden: int) -> float:
    """One of the ledger's 4 all-to-alls per MoE layer: (n-1)/n of tokens x k x h x 4 B."""
    model = ModelSpec(name="toy-moe", layers=1, hidden=hidden, heads=1, vocab=1,
                      seq_len=tokens, ffn_hidden=hidden, num_experts=EXPERTS, top_k=TOPK)
    return ep_comms(model, ParallelConfig(dp=n, ep=n, act_bytes=4), tokens, "-")[0].bytes / 4


def _bytes(rep: ToyReport, n: int, got: list) -> None:
    """Handed payload at the toy's size; the wire at WIRE_TOKENS, per side: dispatch
    forward and combine backward leave from the token's rank (T x k rows); combine
    forward and dispatch backward from the expert's rank (its load)."""
    pay = [sum(p for p, _ in g[4]) for g in got]
    rep.bytes.append(ByteRow("all_to_all payload", pay, [4 * TOKENS * TOPK * HIDDEN * 4] * n,
                             "dispatch sends T*k*h*4 B on every rank; the combine carries "
                             "what each rank received: only the mean is the ledger's"))
    rep.check("mean all-to-all payload equals the ledger's tokens x k x h x 4 passes",
              abs(sum(pay) / n - 4 * TOKENS * TOPK * HIDDEN * 4) < 1e-9)
    even = _ledger_pass(n, WIRE_TOKENS, WIRE_HIDDEN)
    loads = [g[8] for g in got]
    mean = sum(loads) / n
    for side, idx in (("token side", (0, 2)), ("expert side", (1, 3))):
        row = ByteRow(f"all_to_all {side}, {WIRE_TOKENS} tokens",
                      [sum(g[7][i][0] for i in idx) for g in got], [2 * even] * n,
                      "ledger: even routing" + (" (the busiest rank is held to it x rho)"
                                                if side == "expert side" else ""))
        rep.bytes.append(row)
        wire_row(rep, row, [None if g[7][idx[0]][1] is None else
                            sum(g[7][i][1] for i in idx) for g in got], "all_to_all",
                 [float(sum(g[7][i][2] for i in idx)) for g in got])
    if rep.bytes[-1].wire is None:
        return
    busiest = loads.index(max(loads))
    rho = max(loads) / mean
    w, want = rep.bytes[-1].wire[busiest], 2 * even * rho
    rep.check(f"busiest rank ({busiest}) on the wire = the ledger's even figure x rho "
              f"{rho:.2f} (within {ROUTING_TOLERANCE:.0%})",
              abs(w / want - 1) <= ROUTING_TOLERANCE, f"{w:.0f} vs {want:.0f} B")
