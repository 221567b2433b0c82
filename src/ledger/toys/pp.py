"""Pipeline parallelism: one layer per rank, micro-batches passed with send/recv.

Each rank executes its action list from ``ledger.pipeline.schedules`` (GPipe, then 1F1B on
the same stages): a forward receives the previous stage's activation, applies its
layer and sends the result on; a backward receives the next stage's gradient,
back-propagates through the stored micro-batch and sends the input gradient back.
Weight gradients accumulate over micro-batches and must equal one process's.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ledger.config import ParallelConfig
from ledger.pipeline import peak_inflight, schedule
from ledger.placement import pp_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, max_err, wire_row

HIDDEN, ROWS, SEED = 4, 2, 0
WIRE_ROWS = 2048  # the wire run: 32 KiB per boundary tensor, gloo framing < 1%


def _data(p: int, m: int, rows: int = ROWS):
    g = torch.Generator().manual_seed(SEED)
    weights = torch.randn(p, HIDDEN, HIDDEN, generator=g) * 0.5
    inputs = torch.randn(m, rows, HIDDEN, generator=g)
    targets = torch.randn(m, rows, HIDDEN, generator=g)
    return weights, inputs, targets


def _layer(x, w):
    return torch.tanh(x @ w)


def _reference(p: int, m: int) -> torch.Tensor:
    weights, inputs, targets = _data(p, m)
    w = weights.clone().requires_grad_()
    for i in range(m):
        x = inputs[i]
        for s in range(p):
            x = _layer(x, w[s])
        (0.5 * ((x - targets[i]) ** 2).sum()).backward()
    return w.grad


def execute(ctx: Ctx, kind: str, m: int, rows: int = ROWS):
    """Run this rank's action list; returns its weight gradient and peak in-flight."""
    p, r = ctx.world, ctx.rank
    weights, inputs, targets = _data(p, m, rows)
    w = ctx.t(weights[r]).requires_grad_()
    stored, peak, pending = {}, 0, []
    for a in schedule(kind, p, m)[r]:
        if a.kind == "F":
            x = ctx.t(inputs[a.mb]) if r == 0 else ctx.t(torch.empty(rows, HIDDEN))
            if r > 0:
                dist.recv(x, r - 1)  # the previous stage's activation
            x.requires_grad_(r > 0)
            y = _layer(x, w)
            stored[a.mb] = (x, y)  # kept for the backward
            peak = max(peak, len(stored))
            if r < p - 1:
                pending.append(dist.isend(y.detach().contiguous(), r + 1))  # ROWS*H*4 B
        else:
            x, y = stored.pop(a.mb)
            if r == p - 1:
                grad = y.detach() - ctx.t(targets[a.mb])  # d(0.5 * |y - t|^2)/dy
            else:
                grad = ctx.t(torch.empty(rows, HIDDEN))
                dist.recv(grad, r + 1)  # the next stage's gradient
            # (y * grad).sum() has gradient ``grad`` at y; y.backward(grad) would do the same
            # but its first call imports sympy (~0.6 s per rank)
            (y * grad).sum().backward()
            if r > 0:
                pending.append(dist.isend(x.grad.contiguous(), r - 1))  # ROWS*H*4 B
    for req in pending:
        req.wait()
    return w.grad.cpu(), peak


def run(ctx: Ctx) -> ToyReport | None:
    p, m = ctx.world, ctx.world
    rows = {}
    for kind in ("gpipe", "1f1b"):
        with ctx.metering(kind):
            rows[kind] = execute(ctx, kind, m)
    sent = {k: sum(c.ring for c in ctx.meter.calls if c.tag == k) for k in rows}
    wire = {}
    for kind in ("gpipe", "1f1b"):
        with ctx.metering(f"wire {kind}"):
            execute(ctx, kind, m, WIRE_ROWS)
        wire[kind] = (sum(c.ring for c in ctx.meter.calls if c.tag == f"wire {kind}"),
                      ctx.wire(f"wire {kind}"))
    got = ctx.gather((rows, sent, wire))
    if got is None:
        return None
    ref = _reference(p, m)
    rep = ToyReport("pp")
    rep.lines = [f"{p} stages x {m} micro-batches; weight-gradient error against one "
                 f"process per stage:"]
    for kind, label in (("gpipe", "GPipe"), ("1f1b", "1F1B ")):
        errs = [max_err(g[0][kind][0], ref[i]) for i, g in enumerate(got)]
        peaks = [g[0][kind][1] for g in got]
        rep.lines.append(f"  {label}: {[f'{e:.1e}' for e in errs]}   peak stored "
                         f"micro-batches per stage {peaks}")
        rep.values[kind] = {"errors": errs, "peak": peaks}
        rep.check(f"{label.strip()} weight gradients equal one process (<= 1e-6)",
                  all(e <= 1e-6 for e in errs))
        # closed forms: GPipe holds all m; 1F1B rank i holds min(p - i, m)
        expected = [m] * p if kind == "gpipe" else [min(p - i, m) for i in range(p)]
        rep.check(f"{label.strip()} peak stored activations are {expected}",
                  peaks == expected == [peak_inflight(a) for a in schedule(kind, p, m)])
    _bytes(rep, p, m, got)
    return rep


def _bytes(rep: ToyReport, p: int, m: int, got: list) -> None:
    """The ledger's 2 x m boundary tensors is an interior stage's; the first stage only
    sends activations and the last only gradients, half each."""
    predicted = pp_comms(ParallelConfig(pp=p, num_microbatches=m, act_bytes=4),
                         ROWS * HIDDEN * 4, "-")[0].bytes
    for kind in ("gpipe", "1f1b"):
        measured = [g[1][kind] for g in got]
        rep.bytes.append(ByteRow(f"send_recv ({kind})", measured, [predicted] * p,
                                 "the ledger's figure is an interior stage's; the first and "
                                 "last stages send one direction only"))
        interior = all(x == predicted for x in measured[1:-1])
        ends = measured[0] == measured[-1] == predicted / 2
        rep.check(f"{kind} boundary bytes: interior stages = ledger, end stages = half",
                  interior and ends)
    big = pp_comms(ParallelConfig(pp=p, num_microbatches=m, act_bytes=4),
                   WIRE_ROWS * HIDDEN * 4, "-")[0].bytes
    ends = [big / 2] + [big] * (p - 2) + [big / 2]  # one direction at the ends (above)
    for kind in ("gpipe", "1f1b"):
        row = ByteRow(f"send_recv ({kind}, {WIRE_ROWS} rows)", [g[2][kind][0] for g in got],
                      ends, "interior stages: the ledger's figure; end stages: half of it")
        rep.bytes.append(row)
        wire_row(rep, row, [g[2][kind][1] for g in got], "send_recv")
