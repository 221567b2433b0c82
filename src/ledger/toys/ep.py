"""Expert parallelism: route, dispatch all-to-all, local experts, combine all-to-all.

8 experts, top-2, 16 tokens of width 4 per rank, one random router shared by every
rank; rank r holds experts 2r and 2r+1 (with 4 ranks). The all-to-all is an autograd
function whose backward is the all-to-all with the splits swapped. The reference is
every token visiting its own experts in one process.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ledger.model import ModelSpec
from ledger.parallel import ParallelConfig, ep_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, max_err

EXPERTS, TOPK, TOKENS, HIDDEN, CAPACITY_FACTOR, SEED = 8, 2, 16, 4, 1.25, 0


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


def _data(n: int):
    g = torch.Generator().manual_seed(SEED)
    router = torch.randn(HIDDEN, EXPERTS, generator=g)
    experts = torch.randn(EXPERTS, HIDDEN, HIDDEN, generator=g) * 0.5
    tokens = torch.randn(n * TOKENS, HIDDEN, generator=g)
    upstream = torch.randn(n * TOKENS, HIDDEN, generator=g)  # dLoss/dout
    return router, experts, tokens, upstream


def _route(x, router):
    weight, expert = torch.softmax(x @ router, 1).topk(TOPK, 1)
    return x.repeat_interleave(TOPK, 0), expert.reshape(-1), weight.reshape(-1)


def _combine(flat_w, y):
    return (flat_w[:, None] * y).reshape(-1, TOPK, HIDDEN).sum(1)


def _reference(x, router, experts, upstream):
    """Every token computes its own experts, in one process."""
    w = experts.clone().requires_grad_()
    x = x.clone().requires_grad_()
    flat_x, flat_e, flat_w = _route(x, router)
    y = flat_x.new_zeros(flat_x.shape)
    for e in range(EXPERTS):
        sel = flat_e == e
        y[sel] = torch.tanh(flat_x[sel] @ w[e])
    out = _combine(flat_w, y)
    (out * upstream).sum().backward()
    return out.detach(), w.grad, x.grad


def run(ctx: Ctx) -> ToyReport | None:
    n, r = ctx.world, ctx.rank
    per_rank = EXPERTS // n
    router, experts, tokens, upstream = _data(n)
    x, up = tokens[r * TOKENS:(r + 1) * TOKENS], upstream[r * TOKENS:(r + 1) * TOKENS]
    w_local = ctx.t(experts[r * per_rank:(r + 1) * per_rank]).requires_grad_()
    x_dev = ctx.t(x).requires_grad_()  # tokens come from earlier layers: they need grads
    flat_x, flat_e, flat_w = _route(x_dev, ctx.t(router))
    dst = flat_e // per_rank  # the rank that holds each routed copy's expert
    order = torch.argsort(dst, stable=True)  # grouped by destination rank
    send = torch.bincount(dst, minlength=n)
    with ctx.metering("counts"):  # how many rows each rank will receive, and for whom
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        send_l, recv_l = send.tolist(), recv.tolist()
        recv_e = flat_e.new_empty(sum(recv_l))
        dist.all_to_all_single(recv_e, flat_e[order], recv_l, send_l)
    with ctx.metering("tokens"):
        xin = AllToAll.apply(flat_x[order], recv_l, send_l)  # dispatch: T*k*h*4 B
        yout = xin.new_zeros(xin.shape)
        for j in range(per_rank):  # each local expert on the rows routed to it
            sel = recv_e == r * per_rank + j
            yout[sel] = torch.tanh(xin[sel] @ w_local[j])
        yback = AllToAll.apply(yout, send_l, recv_l)  # combine: the swapped route
        out = _combine(flat_w, yback[torch.argsort(order)])
        (out * ctx.t(up)).sum().backward()
    ref_out, ref_grad, ref_dx = _reference(x, router, experts, up)
    dist.all_reduce(ref_grad)  # reference gradient over every rank's tokens (not metered)
    err_f = max_err(out, ref_out)
    err_g = max_err(w_local.grad, ref_grad[r * per_rank:(r + 1) * per_rank])
    err_g = max(err_g, max_err(x_dev.grad, ref_dx))  # token gradients came back too
    calls = [(c.tag, c.payload, c.off_rank) for c in ctx.meter.calls
             if c.tag in ("counts", "tokens")]
    got = ctx.gather((send_l, flat_e.cpu().tolist(), err_f, err_g, calls))
    return None if got is None else _report(n, got)


def _report(n: int, got: list) -> ToyReport:
    matrix = [g[0] for g in got]
    received = [sum(row[j] for row in matrix) for j in range(n)]
    mean = sum(received) / n
    rho = max(received) / mean
    per_expert = [sum(e == k for g in got for e in g[1]) for k in range(EXPERTS)]
    capacity = math.ceil(CAPACITY_FACTOR * n * TOKENS * TOPK / EXPERTS)
    over = [k for k, c in enumerate(per_expert) if c > capacity]
    rep = ToyReport("ep")
    rep.lines = ["dispatch matrix: row i = rows rank i sends to ranks 0..n-1"]
    rep.lines += [f"  rank {i}: {row}   total {sum(row)}" for i, row in enumerate(matrix)]
    rep.lines += [
        f"rows received per rank: {received}   mean {mean:g}, max / mean = rho = {rho:.2f}",
        f"rows per expert: {per_expert}   mean {n * TOKENS * TOPK / EXPERTS:g}; capacity "
        f"C = ceil({CAPACITY_FACTOR} x {n * TOKENS} x {TOPK} / {EXPERTS}) = {capacity}, "
        f"experts over C: {over}",
        "forward error against every token computing its own experts: "
        + str([f"{g[2]:.1e}" for g in got]),
        "local expert and token gradient error against the reference: "
        + str([f"{g[3]:.1e}" for g in got]),
    ]
    rep.values = {"matrix": matrix, "received": received, "rho": rho,
                  "per_expert": per_expert, "capacity": capacity, "over": over}
    rep.check("every rank sends tokens x top-k rows", all(sum(r) == TOKENS * TOPK
                                                          for r in matrix))
    rep.check("capacity C = ceil(CF x T x k / E)",
              capacity == math.ceil(1.25 * n * TOKENS * TOPK / EXPERTS))
    rep.check("forward equals the reference exactly", all(g[2] == 0.0 for g in got))
    rep.check("local expert and token gradients equal the reference (<= 1e-5)",
              all(g[3] <= 1e-5 for g in got))
    _bytes(rep, n, got, rho)
    return rep


def _bytes(rep: ToyReport, n: int, got: list, rho: float) -> None:
    """The ledger's EP row: 4 all-to-alls per MoE layer of tokens x k x h, of which
    (n-1)/n leaves the rank when routing is even."""
    model = ModelSpec(name="toy-moe", layers=1, hidden=HIDDEN, heads=1, vocab=1,
                      seq_len=TOKENS, ffn_hidden=HIDDEN, num_experts=EXPERTS, top_k=TOPK)
    cfg = ParallelConfig(dp=n, ep=n, act_bytes=4)
    wire = ep_comms(model, cfg, TOKENS, "-")[0].bytes
    payload = 4 * TOKENS * TOPK * HIDDEN * 4
    pay = [sum(p for t, p, _ in g[4] if t == "tokens") for g in got]
    off = [sum(o for t, _, o in g[4] if t == "tokens") for g in got]
    meta = [sum(p for t, p, _ in g[4] if t == "counts") for g in got]
    rep.bytes += [
        ByteRow("all_to_all payload", pay, [payload] * n,
                "dispatch sends T*k*h*4 B on every rank; the combine carries what each rank "
                "received, so ranks differ by the routing and only the mean is the ledger's"),
        ByteRow("all_to_all off-rank", off, [wire] * n,
                f"the ledger assumes even routing, (n-1)/n of the payload leaves the rank; "
                f"the busiest rank receives rho = {rho:.2f} x the mean"),
    ]
    rep.lines.append(f"routing metadata (row counts, expert ids), not in the ledger: {meta} B")
    rep.check("mean all-to-all payload equals the ledger's tokens x k x h x 4 passes",
              abs(sum(pay) / n - payload) < 1e-9)
