"""Context parallelism: ring attention (plain and causal head-tail) and Ulysses.

2 tokens per rank (8 over 4 ranks), 8 heads of width 2. Ring: each rank keeps its Q
and passes its K/V block to the next rank with isend/irecv while it attends to the
block it holds; blocks are merged by online softmax (running max m, denominator l,
numerator acc). Ulysses: all-to-all from "my tokens, all heads" to "all tokens, my
heads", plain attention, and back.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.placement import RING_BLOCKS_PER_STEP, cp_comms
from ledger.toys.common import ByteRow, Ctx, ToyReport, handed_check, max_err, wire_row

TOKENS_PER_RANK, HEADS, HEAD_DIM, SEED = 2, 8, 2, 0
WIRE_TOKENS_PER_RANK, WIRE_HEAD_DIM = 128, 32  # the wire run: 128 KiB per Ulysses
TAGS = ("ring", "causal", "ulysses")  # all-to-all, framing < 1% of the wire


def merge(state, scores: torch.Tensor, v: torch.Tensor):
    """Fold one block into the running (m, l, acc): rescale both to the new max."""
    m_b = scores.amax(-1, keepdim=True)
    p = torch.exp(scores - m_b)
    l_b, acc_b = p.sum(-1, keepdim=True), p @ v
    if state is None:
        return m_b, l_b, acc_b
    m, l, acc = state
    m_new = torch.maximum(m, m_b)
    a, b = torch.exp(m - m_new), torch.exp(m_b - m_new)
    return m_new, l * a + l_b * b, acc * a + acc_b * b


def _scores(q, k, causal_diag: bool = False):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal_diag:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return s


def _full(q, k, v, causal=False):
    s = _scores(q, k, causal_diag=causal)
    return torch.softmax(s, -1) @ v


def _ring_pass(ctx: Ctx, block: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Start sending ``block`` to rank+1 and receiving rank-1's; the caller computes."""
    n, r = ctx.world, ctx.rank
    incoming = torch.empty_like(block)
    reqs = [dist.isend(block.contiguous(), (r + 1) % n),  # one K/V block per step
            dist.irecv(incoming, (r - 1) % n)]
    return incoming, reqs


def ring(ctx: Ctx, q, k, v):
    """Non-causal ring attention; returns this rank's output and its block order."""
    n, r = ctx.world, ctx.rank
    kv, state, order = torch.stack([k, v]), None, []
    for step in range(n):
        order.append((r - step) % n)
        if step < n - 1:
            incoming, reqs = _ring_pass(ctx, kv)
        state = merge(state, _scores(q, kv[0]), kv[1])  # overlaps the transfer
        if step < n - 1:
            for req in reqs:
                req.wait()
            kv = incoming
    return state[2] / state[1], order


def ring_causal(ctx: Ctx, q_chunks, kv_chunks):
    """Causal ring over 2n chunks, rank r holding chunks r and 2n-1-r (head-tail)."""
    n, r = ctx.world, ctx.rank
    mine = (r, 2 * n - 1 - r)
    kv = torch.stack([torch.stack(c) for c in kv_chunks])  # [2 chunks, K/V, H, c, d]
    states, work = [None, None], 0
    for step in range(n):
        src = (r - step) % n
        if step < n - 1:
            incoming, reqs = _ring_pass(ctx, kv)
        for i, a in enumerate(mine):
            for j, b in enumerate((src, 2 * n - 1 - src)):
                if b <= a:  # a query chunk sees key chunks at or before it
                    states[i] = merge(states[i], _scores(q_chunks[i], kv[j, 0], b == a),
                                      kv[j, 1])
                    work += 1
        if step < n - 1:
            for req in reqs:
                req.wait()
            kv = incoming
    return [s[2] / s[1] for s in states], work


def ulysses(ctx: Ctx, q, k, v):
    """All-to-all to (my heads, all tokens), attention, all-to-all back."""
    n = ctx.world
    h, c, d = q.shape

    def to_heads(x):  # [H, c, d] -> [H/n, n*c, d]; chunk j of the heads goes to rank j
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous())  # (n-1)/n x |x| bytes
        return out.reshape(n, h // n, c, d).transpose(0, 1).reshape(h // n, n * c, d)

    def to_tokens(y):  # [H/n, n*c, d] -> [H, c, d]; token chunk j goes back to rank j
        x = y.reshape(h // n, n, c, d).transpose(0, 1).contiguous()
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        return out.reshape(h, c, d)

    return to_tokens(_full(to_heads(q), to_heads(k), to_heads(v)))


def worked_example():
    """One query, four keys in two blocks: scores [1, 0 | 2, 0]."""
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    s = torch.tensor([[1.0, 0.0, 2.0, 0.0]])
    m, l, acc = merge(merge(None, s[:, :2], v[:2]), s[:, 2:], v[2:])
    return (acc / l)[0], float(l), torch.softmax(s, -1) @ v


def _attend(ctx: Ctx, c: int, d: int, prefix: str = ""):
    """The three mechanisms on c tokens per rank, head width d; tags ``prefix + TAGS``."""
    n, r = ctx.world, ctx.rank
    g = torch.Generator().manual_seed(SEED)
    q, k, v = (ctx.t(torch.randn(HEADS, n * c, d, generator=g)) for _ in range(3))
    mine = slice(r * c, (r + 1) * c)
    with ctx.metering(prefix + "ring"):
        out, order = ring(ctx, q[:, mine], k[:, mine], v[:, mine])
    err_ring = max_err(out, _full(q, k, v)[:, mine])
    cs = n * c // (2 * n)  # tokens per causal chunk
    chunk = lambda j: slice(j * cs, (j + 1) * cs)  # noqa: E731
    ids = (r, 2 * n - 1 - r)
    with ctx.metering(prefix + "causal"):
        outs, work = ring_causal(ctx, [q[:, chunk(j)] for j in ids],
                                 [(k[:, chunk(j)], v[:, chunk(j)]) for j in ids])
    ref = _full(q, k, v, causal=True)
    err_causal = max(max_err(o, ref[:, chunk(j)]) for o, j in zip(outs, ids))
    with ctx.metering(prefix + "ulysses"):
        out_u = ulysses(ctx, q[:, mine], k[:, mine], v[:, mine])
    err_u = max_err(out_u, _full(q, k, v)[:, mine])
    return order, err_ring, work, err_causal, err_u


def run(ctx: Ctx) -> ToyReport | None:
    order, err_ring, work, err_causal, err_u = _attend(ctx, TOKENS_PER_RANK, HEAD_DIM)
    sent = {tag: sum(x.ring for x in ctx.meter.calls if x.tag == tag) for tag in TAGS}
    _attend(ctx, WIRE_TOKENS_PER_RANK, WIRE_HEAD_DIM, "wire ")
    wire = {tag: (sum(x.ring for x in ctx.meter.calls if x.tag == "wire " + tag),
                  ctx.wire("wire " + tag)) for tag in TAGS}
    got = ctx.gather((order, err_ring, work, err_causal, err_u, sent, wire))
    return None if got is None else _report(n=ctx.world, got=got)


def _report(n: int, got: list) -> ToyReport:
    rep = ToyReport("cp")
    rep.lines = [f"{n * TOKENS_PER_RANK} tokens, {n} ranks x {TOKENS_PER_RANK}; K/V block "
                 f"each rank attends to at each step (its own first):"]
    rep.lines += [f"  rank {i}: K/V blocks {g[0]}" for i, g in enumerate(got)]
    rep.lines.append("ring, max error against full attention per rank: "
                     + str([f"{g[1]:.1e}" for g in got]))
    out, l, full = worked_example()
    rep.lines.append(f"two blocks, scores [1, 0 | 2, 0]: merged output ({out[0]:.3f}, "
                     f"{out[1]:.3f}), merged l = {l:.3f} (= 12.107 / e^2); one softmax "
                     f"({full[0, 0]:.3f}, {full[0, 1]:.3f})")
    contiguous = [4 * i + 3 for i in range(n)]
    rep.lines.append(f"causal, {2 * n} chunks head-tail: work per rank {[g[2] for g in got]} "
                     f"(contiguous split would be {contiguous}); max error "
                     + str([f"{g[3]:.1e}" for g in got]))
    rep.lines.append("Ulysses (all-to-all by heads), max error per rank: "
                     + str([f"{g[4]:.1e}" for g in got]))
    rep.values = {"orders": [g[0] for g in got], "work": [g[2] for g in got],
                  "worked_output": [round(float(x), 3) for x in out], "worked_l": round(l, 3)}
    rep.check("ring block order: rank r uses block (r - step) mod n",
              all(g[0] == [(i - s) % n for s in range(n)] for i, g in enumerate(got)))
    rep.check("ring equals full attention (<= 1e-6)", all(g[1] <= 1e-6 for g in got))
    rep.check("two-block merge equals one softmax", max_err(out, full[0]) <= 1e-6)
    rep.check("head-tail causal work is equal on every rank", len({g[2] for g in got}) == 1)
    rep.check("causal ring equals causal attention (<= 1e-6)", all(g[3] <= 1e-6 for g in got))
    rep.check("Ulysses equals full attention (<= 1e-6)", all(g[4] <= 1e-6 for g in got))
    _bytes(rep, n, got)
    return rep


def _ledger(n: int, kind: str, c: int, d: int) -> float:
    """The ledger's CP bytes for one layer's forward: the ring's (cp-1) K/V blocks of
    its 3(cp-1) per layer, Ulysses' 4 forward all-to-alls of its 8."""
    model = ModelSpec(name="toy", layers=1, hidden=HEADS * d, heads=HEADS,
                      vocab=1, seq_len=n * c, ffn_hidden=1)
    cfg = ParallelConfig(cp=n, cp_kind=kind, act_bytes=4)
    total = sum(x.bytes for x in cp_comms(model, cfg, c, 1, "-"))
    return total / (RING_BLOCKS_PER_STEP if kind == "ring" else 2)


def _bytes(rep: ToyReport, n: int, got: list) -> None:
    """Handed bytes at the toy's size; then the same code at the wire run's size."""
    for tag, kind, coll in (("ring", "ring", "send_recv"), ("causal", "ring", "send_recv"),
                            ("ulysses", "ulysses", "all_to_all")):
        rep.bytes.append(ByteRow(f"{coll} ({tag})", [g[5][tag] for g in got],
                                 [_ledger(n, kind, TOKENS_PER_RANK, HEAD_DIM)] * n,
                                 "forward only" if tag != "causal" else
                                 "forward only; two chunks per block, same bytes"))
        handed_check(rep, rep.bytes[-1])
    for tag, kind, coll in (("ring", "ring", "send_recv"), ("causal", "ring", "send_recv"),
                            ("ulysses", "ulysses", "all_to_all")):
        row = ByteRow(f"{coll} ({tag}, {WIRE_TOKENS_PER_RANK} tokens x d {WIRE_HEAD_DIM})",
                      [g[6][tag][0] for g in got],
                      [_ledger(n, kind, WIRE_TOKENS_PER_RANK, WIRE_HEAD_DIM)] * n)
        rep.bytes.append(row)
        wire_row(rep, row, [g[6][tag][1] for g in got], coll)
