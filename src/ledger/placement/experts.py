"""Expert parallelism as MoE frameworks run it: the dispatcher's bytes per GPU per step.

Megatron-Core lays the experts on a grid of their own over the ranks of one PP stage,
ETP x EP x EDP = TP x CP x DP (``ledger.placement.layout``; parallel_state.py L874-907), and
moves the routed tokens with one of three dispatchers (token_dispatcher.py at the
snapshot in ``ledger.frameworks.SNAPSHOTS``):

- ``alltoall`` (L375-387): each rank permutes its local tokens - the SP shard,
  s b / (tp cp) - into tokens x top_k rows (L554-556) and all-to-alls them and their
  probs over EP (L705-724); with ETP > 1 it all-gathers what it received over ETP
  (L741-751). Combine: reduce-scatter over ETP, then the reverse all-to-all (L824-870).
  The backward mirrors each (all-to-all <-> all-to-all, all-gather <-> reduce-scatter).
- ``allgather`` (L233-372): all-gathers the hidden states [(s/tp) b, h], the routing map
  (bool, no grad) and the probs [tokens, experts] over ETP x EP (L281-303); combine is a
  reduce-scatter of the whole gathered tensor (L355-368).
- ``flex`` (L1809; DeepEP backend L1228-1245): DeepSeek-V3's dispatch (report
  arXiv:2412.19437 sec. 3.2.2): a token crosses IB once per destination node and is
  forwarded inside the node over NVLink to the GPUs holding its experts. Node-limited
  routing (sec. 2.1.2: at most M = 4 nodes per token; config.json n_group / topk_group,
  Megatron moe_router_num_groups / moe_router_group_topk, transformer_config.py
  L780-797) bounds the nodes, and so the IB bytes. Under ``alltoall`` every (token,
  expert) row travels to its GPU on its own: node limits move rows, not their count, so
  they leave its bytes as they are (in expectation a row stays on its node 1/nodes of
  the time either way).

Routing is even unless ``MoESpec.imbalance`` says otherwise: the busiest EP rank then
receives ``imbalance`` x the even share of rows. The rows below are that rank's sends: the
token side (dispatch forward, combine backward) is even whatever the routing; the
expert side (combine forward, dispatch backward, and the ETP gathers of what it received)
carries its load (``ledger.verify.ep`` measures both). The allgather dispatcher gathers
every token whatever the routing, so its bytes do not move.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from ledger.arch.selective import selected
from ledger.config import dispatcher, expert_tp, sp_shard_dispatch
from ledger.errors import LedgerError, require_divides
from ledger.frameworks import ep_wire_ratio
from ledger.frameworks import of as framework_of
from ledger.frameworks.host_checks import moe_overlap_problems
from ledger.placement.collectives import ring_bytes as coll_bytes


def moe_tokens(cfg, tokens):
    """Tokens one rank routes per micro-batch: its CP shard, and under sequence
    parallelism only its SP shard where the dispatcher starts from it (Megatron's
    alltoall dispatcher takes the layer input as SP leaves it)."""
    return tokens / (cfg.tp if sp_shard_dispatch(cfg) else 1)


def check_model(model, cfg) -> None:
    """What the expert grid needs of the model: experts split by ep, their width by etp;
    the shared experts' overlap a dispatcher that runs it (``moe_overlap_problems``)."""
    experts = model.num_experts if model.is_moe else cfg.moe.num_experts
    if cfg.ep > 1:
        if experts <= 1:
            raise LedgerError("ep", f"ep({cfg.ep}) > 1 but {model.name} has no experts")
        require_divides("num_experts", experts, "ep", cfg.ep)
    if model.is_moe:
        require_divides("moe_ffn_hidden", model.moe_ffn_hidden, "etp", expert_tp(cfg))
    shared = bool(model.is_moe and model.shared_experts)
    for field, problem in moe_overlap_problems(cfg.shared_expert_overlap, shared,
                                               dispatcher(cfg), cfg.ep_overlap,
                                               cfg.delay_wgrad,
                                               selected(cfg.recompute, cfg.recompute_modules)):
        raise LedgerError(field, problem)


def remote_nodes(model, nodes: int) -> float:
    """Distinct other nodes one token's experts sit on, on average, when the EP group spans
    ``nodes`` nodes with the experts spread evenly (uniform routing): ``parts_hit`` x
    (nodes - 1)/nodes - DeepSeek-V3 at 8 nodes: exactly 4 nodes, 3.5 remote."""
    if nodes <= 1:
        return 0.0
    return parts_hit(model, nodes) * (nodes - 1) / nodes


def parts_hit(model, parts: int) -> float:
    """Distinct of ``parts`` equal shards of the experts (nodes, or EP ranks) one token's
    experts sit on, on average (uniform routing). Without a node limit: k of E experts, a
    shard missed with probability C(E - E/parts, k) / C(E, k). Node-limited (router groups
    aligned on the shards): M of G groups; a shard of whole groups missed with
    C(G - G/parts, M) / C(G, M), each chosen group taken as hit; a shard inside a group
    (parts a multiple of G) hit when its group is chosen and one of the k, spread over the
    M chosen groups' M E/G experts, is its own: M parts/G x (1 - C(ME/G - E/parts, k) /
    C(ME/G, k)). The smaller of the two."""
    if parts <= 1:
        return 1.0
    e, k = model.num_experts, model.top_k
    hit = parts * (1 - comb(e - e // parts, k) / comb(e, k))
    g, m = model.router_groups, model.router_group_topk
    if g and m and g % parts == 0:
        hit = min(hit, parts * (1 - comb(g - g // parts, m) / comb(g, m)))
    elif g and m and m < g and parts % g == 0:
        chosen = m * e // g
        hit = min(hit, m * parts / g * (1 - comb(chosen - e // parts, k) / comb(chosen, k)))
    return hit


@dataclass(frozen=True)
class _Sizes:
    """One MoE layer's routed payload on one GPU for one micro-batch."""

    local: float  # tokens the dispatcher starts from
    rows: float  # local x top_k x capacity: rows this rank sends per dispatch
    h_bytes: float  # one row (hidden x act_bytes; LatentMoE dispatches and combines at the
    #                 latent width: moe_layer.py:488-492, :591-592 at d98e8a64dd)
    prob_bytes: float  # one routing prob (the router's dtype, bf16 here)
    passes: int  # forwards per micro-batch (2 under full recompute) + 1 backward
    steps: float  # MoE layers on this PP rank x micro-batches
    rho: float  # busiest rank's load / the mean


def _sizes(model, cfg, tokens, forwards) -> _Sizes:
    topk = model.top_k if model.is_moe else cfg.moe.topk
    layers = (model.moe_layers if model.is_moe else model.layers) / cfg.pp
    local = moe_tokens(cfg, tokens)
    # an FP8 recipe may dispatch in FP8 and combine in BF16: the mean of the four passes
    fw = framework_of(cfg)
    wire = ep_wire_ratio(fw, cfg.act_bytes)
    return _Sizes(local, local * topk * cfg.moe.capacity_factor,
                  getattr(model, "expert_hidden", model.hidden) * cfg.act_bytes * wire,
                  cfg.act_bytes, forwards + 1, layers * cfg.num_microbatches,
                  cfg.moe.imbalance)


def _row(kind, link, nbytes, what):
    return kind, link, nbytes, what


def _links(lay, group):
    if not hasattr(lay, "link"):  # one link (or the planner's array of them) for every row
        return lay, lay, 1
    return lay.link(group), "nvlink", lay.per_node(group)


def ep_rows(model, cfg, tokens, lay, forwards: int, one_pass: bool = False) -> list:
    """The dispatcher's (collective, link, bytes, payload) rows per GPU per step (the
    busiest EP rank under an imbalance); ``ledger.placement.comms.ep_comms`` makes them Comm rows.
    ``lay``: the rank Layout (links and ranks per node of each expert group), or one link
    name for every row (a single-node toy); ``forwards``: forward passes per micro-batch.
    ``one_pass``: one MoE layer, one micro-batch, one direction - a forward, or the
    backward, which mirrors it byte for byte (the allgather's routing metadata, forward
    only, and the probs' gradients, backward only, averaged over the two) - for the time
    model."""
    if not (model.is_moe or cfg.moe.expert_fraction > 0 or cfg.moe.num_experts > 1):
        return []  # a dense model routes nothing
    z = _sizes(model, cfg, tokens, forwards)
    if one_pass:  # one forward and one backward, halved: one direction on average
        z = _Sizes(z.local, z.rows, z.h_bytes, z.prob_bytes, 2, 0.5, z.rho)
    kind = dispatcher(cfg)
    if kind == "allgather":
        return _allgather(z, model, cfg, lay)
    out = _flex(z, model, cfg, lay) if kind == "flex" else _alltoall(z, cfg, lay)
    if sp_shard_dispatch(cfg) and kind == "alltoall":
        # AG over ETP of the received rows in the dispatch, RS in the combine; the
        # backward swaps them. All on the expert side: the received load, rho x even.
        # (etp = 1 moves nothing: sizes stay arithmetic for the planner's arrays.)
        etp = expert_tp(cfg)
        link = lay if not hasattr(lay, "link") else lay.link("etp")
        tok = coll_bytes("all_gather", etp, z.rows * z.rho * etp * z.h_bytes) * z.passes \
            * z.steps
        out += [_row("all_gather", link, tok, "routed tokens, ETP gather"),
                _row("reduce_scatter", link, tok, "expert outputs, ETP reduce")]
    return out


def _alltoall(z: _Sizes, cfg, lay) -> list:
    """4 all-to-alls of rows x h per MoE layer and micro-batch (6 under full recompute),
    half on the token side (even), half on the expert side (rho x even). The permuted
    probs that travel with the dispatch (one per row, 1/hidden of its bytes) are left
    out. A row stays home 1/ep of the time, reaches another GPU of its
    node (L - 1)/ep, another node (ep - L)/ep (L: EP ranks per node)."""
    link, near, per_node = _links(lay, "ep")
    ep = cfg.ep
    sides = z.passes * (1 + z.rho)  # token side + expert side
    payload = z.rows * z.h_bytes * sides * z.steps
    if not hasattr(lay, "link"):
        return [_row("all_to_all", link, coll_bytes("all_to_all", ep, payload), "routed tokens")]
    return [_row("all_to_all", link, payload * (ep - per_node) / ep, "routed tokens, other nodes"),
            _row("all_to_all", near, payload * (per_node - 1) / ep, "routed tokens, same node")]


def _flex(z: _Sizes, model, cfg, lay) -> list:
    """DeepEP: per token one IB copy per other destination node (``remote_nodes``), then
    each (token, expert) row that lands on another GPU of its node - (L - 1)/L of them -
    forwarded over NVLink (per row: an upper bound, DeepEP sends a token once per GPU).
    HybridEP (``ep_backend`` "hybridep"): the same IB copies, and inside the NVLink domain
    one copy per destination GPU, not per expert - its dispatch "multicast[s]" each token
    "to all ranks within this node which need this token", one TMA store per rank
    (csrc/hybrid_ep/backend/hybrid_ep_backend.cuh L1619-1637 at deepseek-ai/DeepEP
    hybrid-ep 94a9f8f6), its combine reads one partial sum per such rank (L2286-2330):
    ``parts_hit`` of the EP ranks, (L - 1)/L of them another GPU. Its forward dispatch
    (L1639-1645) and backward combine ("need to transfer the prob for each token as
    well", L4546) also carry every copy's fp32 probs for all E L/ep experts of the
    domain's ranks, IB copies too (L1291): half the passes. Numbers, or the planner's
    arrays of them."""
    link, near, per_node = _links(lay, "ep")
    nodes = cfg.ep // per_node
    sides = z.passes * (1 + z.rho) * z.steps
    hybrid = getattr(cfg, "ep_backend", None) == "hybridep"
    if np.ndim(nodes) or np.ndim(z.local):  # the planner's rows
        each, of = np.unique(nodes, return_inverse=True)
        remote = np.array([remote_nodes(model, int(n)) for n in each])[of].reshape(
            np.shape(nodes))
        cap = z.rows / np.maximum(z.local, 1e-300)
    else:
        remote, cap = remote_nodes(model, nodes), z.rows / max(z.local, 1e-300)  # top_k x cf
    copy = z.h_bytes
    if hybrid:  # one copy per destination GPU; probs of the domain's experts, half the passes
        eps = np.unique(np.asarray(cfg.ep).ravel())
        hit = dict(zip(eps.tolist(), (parts_hit(model, int(e)) for e in eps)))
        ranks = np.vectorize(hit.get)(cfg.ep) if np.ndim(cfg.ep) else hit[cfg.ep]
        cap = ranks * cfg.moe.capacity_factor
        experts = model.num_experts if model.is_moe else cfg.moe.num_experts
        copy = z.h_bytes + experts * per_node / cfg.ep * 4 / 2
    ib = z.local * cfg.moe.capacity_factor * remote * copy * sides
    nvl = z.local * cap * (per_node - 1) / per_node * copy * sides
    g, m = model.router_groups, model.router_group_topk
    limit = f" (<= {m} of {g} groups per token)" if m and m < g else ""
    what = "routed tokens, one copy per GPU" if hybrid else "routed tokens, forwarded in the node"
    return [_row("all_to_all", link, ib, "routed tokens, one copy per node" + limit),
            _row("all_to_all", near, nvl, what)]


def _allgather(z: _Sizes, model, cfg, lay) -> list:
    """All-gather of the hidden states over ETP x EP forward (and on recompute), its
    reduce-scatter backward; the combine's reduce-scatter of the gathered tensor and its
    all-gather backward: (passes) of each, over ETP x EP ranks' tokens. The routing map
    (1 B per token and expert, no grad) and the probs gather forward only; the probs'
    gradient is reduce-scattered in the backward. Routing does not change any of it."""
    sp = sp_shard_dispatch(cfg)
    n = expert_tp(cfg) * cfg.ep if sp else cfg.ep
    link = lay if not hasattr(lay, "link") else lay.link("etp_ep" if sp else "ep")
    gathered = z.local * n
    experts = model.num_experts if model.is_moe else cfg.moe.num_experts
    tok = coll_bytes("all_gather", n, gathered * z.h_bytes) * z.passes * z.steps
    meta = coll_bytes("all_gather", n, gathered * experts * (1 + z.prob_bytes)) \
        * (z.passes - 1) * z.steps
    grads = coll_bytes("reduce_scatter", n, gathered * experts * z.prob_bytes) * z.steps
    return [_row("all_gather", link, tok, "tokens of the ETP x EP group"),
            _row("reduce_scatter", link, tok, "expert outputs, combined"),
            _row("all_gather", link, meta, "routing map + probs"),
            _row("reduce_scatter", link, grads, "routing probs grads")]
