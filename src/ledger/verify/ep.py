"""Expert parallelism with a real router: uneven loads, measured on the wire.

Every rank holds TOKENS tokens; one seeded router (``torch.nn.Linear`` + softmax +
top-k, the same weights on every rank) sends each token's top-k copies to the ranks
that hold those experts. The routing is whatever the router says - nobody sets the
splits - so the loads come out uneven. The dispatch and combine all-to-alls run forward
and backward with those splits. Checked per rank: the kernel's bytes against gloo's
direct all-to-all over the real splits; and for the busiest rank (most rows received)
the ledger's even figure times the stated imbalance rho = max load / mean load.

The ledger prices 4 all-to-alls of tokens x k x h per MoE layer, (n-1)/n of which leaves
the rank when routing is even (``comms.ep_comms``). Two of them (dispatch forward,
combine backward) leave from the tokens' rank: T x k rows each, whatever the routing.
The other two (combine forward, dispatch backward) leave from the experts' rank and
carry what that rank received: its load. So the busiest rank sends, in those two,
rho x the ledger's even share - up to how many of its rows were its own (kept home),
which the ledger's (n-1)/n assumes to be 1/n: ROUTING_TOLERANCE covers that.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.placement import ep_comms
from ledger.toys.ep import AllToAll
from ledger.verify.meter import CollectiveMeter
from ledger.verify.rows import Row

EXPERTS, TOPK, TOKENS, HIDDEN, SEED = 8, 2, 512, 64, 0
SHARED = 0.5  # tokens share a direction (as hidden states do): the router prefers some
ROUTING_TOLERANCE = 0.05  # home rows of the busiest rank vs the ledger's 1/n (see above)


def _router_and_tokens(rank: int):
    torch.manual_seed(SEED)  # the same router and experts on every rank
    router = torch.nn.Linear(HIDDEN, EXPERTS, bias=False)
    experts = torch.nn.Parameter(torch.randn(EXPERTS, HIDDEN, HIDDEN) / HIDDEN ** 0.5)
    common = torch.randn(HIDDEN)
    g = torch.Generator().manual_seed(1000 + rank)  # this rank's own tokens
    return router, experts, torch.randn(TOKENS, HIDDEN, generator=g) + SHARED * common


def _route(router, x, n):
    with torch.no_grad():
        _, expert = torch.softmax(router(x), -1).topk(TOPK, -1)
    flat_e = expert.reshape(-1)
    dst = flat_e // (EXPERTS // n)
    order = torch.argsort(dst, stable=True)
    return flat_e, order, torch.bincount(dst, minlength=n)


def run(ctx, framing, framework: str) -> list[Row]:
    n, r = dist.get_world_size(), dist.get_rank()
    router, experts, x = _router_and_tokens(r)
    flat_e, order, send = _route(router, x, n)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # routing metadata, outside the measurement
    send_l, recv_l = send.tolist(), recv.tolist()
    recv_e = flat_e.new_empty(sum(recv_l))
    dist.all_to_all_single(recv_e, flat_e[order], recv_l, send_l)
    loads = [None] * n
    dist.all_gather_object(loads, sum(recv_l))
    per_rank = EXPERTS // n
    x = x.requires_grad_()
    rows = x.repeat_interleave(TOPK, 0)[order]
    with CollectiveMeter() as meter:
        xin = AllToAll.apply(rows, recv_l, send_l)  # dispatch
        yout = torch.zeros_like(xin)
        for j in range(per_rank):
            sel = recv_e == r * per_rank + j
            yout[sel] = torch.tanh(xin[sel] @ experts[r * per_rank + j])
        back = AllToAll.apply(yout, send_l, recv_l)  # combine
        back.sum().backward()
    return _rows(n, r, meter, framing, send_l, recv_l, loads, framework)


def _rows(n, r, meter, framing, send_l, recv_l, loads, framework) -> list[Row]:
    spec = ModelSpec(name="toy-moe", layers=1, hidden=HIDDEN, heads=1, vocab=1,
                     seq_len=TOKENS, ffn_hidden=HIDDEN, num_experts=EXPERTS, top_k=TOPK)
    cfg = ParallelConfig(dp=n, ep=n, act_bytes=4, framework=framework)
    ledger = ep_comms(spec, cfg, TOKENS, "nvlink")
    even_pass = sum(c.bytes for c in ledger) / 4
    rho = max(loads) / (sum(loads) / n)
    recs = [x for x in meter.records if x.kind == "all_to_all"]
    # dispatch fwd, combine fwd, then autograd: combine bwd, dispatch bwd
    token_side, expert_side = (recs[0], recs[2]), (recs[1], recs[3])

    def wire(group):
        sends = sum(x.gloo.sends for x in group)
        recvs = sum(x.gloo.recvs for x in group)
        frame = framing.of(sends, recvs) if framing else 0.0
        return (sum(x.wire for x in group) - frame if framing else None), frame

    def gloo_fig(group):
        return float(sum(x.gloo.payload_bytes for x in group))

    out = []
    note_t = ("dispatch fwd + combine bwd: T x k rows leave their token's rank; wire held "
              "to gloo's direct all-to-all over the router's real splits "
              f"{send_l} (the ledger's even share is the payload column)")
    w, f = wire(token_side)
    out.append(Row("bytes", "expert all-to-all", "all_to_all, token side", 2 * even_pass,
                   sum(x.payload for x in token_side) * (n - 1) / n, 0.0, note_t, r,
                   w, gloo_fig(token_side), None, f if framing else None))
    w, f = wire(expert_side)
    load_factor = loads[r] / (sum(loads) / n)
    busiest = loads[r] == max(loads)
    out.append(Row("routing", "expert all-to-all",
                   "all_to_all, expert side" + (" (busiest)" if busiest else ""),
                   2 * even_pass * load_factor, w if framing else 0.0, ROUTING_TOLERANCE,
                   f"combine fwd + dispatch bwd carry this rank's load: the ledger's even "
                   f"figure x load / mean load = {loads[r]} / {sum(loads) / n:g} = "
                   f"{load_factor:.3f} (rho = max / mean = {rho:.3f}, loads {loads}); "
                   f"{ROUTING_TOLERANCE:.0%} allowed for the share of its own rows a rank "
                   f"keeps; wire also held to gloo's figure over the real splits "
                   f"{recv_l}", r, w, gloo_fig(expert_side), None, f if framing else None))
    return out
