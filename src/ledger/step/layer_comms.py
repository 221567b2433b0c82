"""A layer's own communication in seconds, per micro-batch and direction: TP's
collectives (priced by NCCL's cost model over the TP group, ``ledger.step.nccl``), CP's
ring steps or all-to-alls, and EP's dispatch and combine. ``ledger.step.timing`` adds them
to the layer's compute and says what overlaps."""
from __future__ import annotations

import numpy as np

from ledger.config import dispatcher, expert_tp
from ledger.model import ModelSpec
from ledger.placement import (cp_comms, ep_pass_comms, forward_passes, kv_width,
                              ring_kv_block_bytes, tp_comms)
from ledger.step.dp import group_shape, nccl_s
from ledger.step.ep_sms import ep_backend
from ledger.system import FLEX_INTER, FLEX_INTRA, System


def tp_times(cfg, s_act, gemm, links, system: System, tp_overlap):
    """TP seconds per layer and micro-batch, forward and backward, exposed and as issued:
    (t_f, t_b, raw_f, raw_b), from ledger.placement.comms' rows. One forward pass moves
    2 RS + 2 AG under SP (2 all-reduces without): the reduce-scatters' bytes split over the
    F + 1 passes that make them (F forwards, F = 2 under full recompute, and the
    backward), twice; the backward is everything else (conjugates and any input
    re-gather) less the recomputed forward, which the caller adds itself. Each call of a
    forward's size is priced by NCCL's cost model over the TP group's ranks and nodes.
    With ``tp_overlap`` (TE's comm-GEMM overlap, needs SP) each collective hides under
    the GEMM it feeds except its first chunk of 1/tp (``tp_overlap``: a bool, or one per
    row of the planner's grid)."""
    rows = tp_comms(cfg, s_act, 1.0, links["tp"])
    m, passes = cfg.num_microbatches, forward_passes(cfg) + 1
    total = sum(r.bytes for r in rows) / m
    fwd = total / passes
    for r in rows:
        if r.kind == "reduce_scatter":
            fwd = 2 * r.bytes / m / passes
    total = total - (passes - 2) * fwd  # the recomputed forward is not the backward's
    calls = 4 if cfg.sequence_parallel else 2  # per forward: 2 AG + 2 RS, or 2 AR
    kind = "all_gather" if cfg.sequence_parallel else "all_reduce"
    lay = links.get("layout")
    _, nodes = group_shape(lay, "tp", cfg.tp) if lay is not None else (cfg.tp, 1)
    one = nccl_s(system, kind, fwd / calls, cfg.tp, nodes)
    raw_f = calls * one
    raw_b = raw_f * (total - fwd) / np.maximum(fwd, 1e-300)
    t_f, t_b = raw_f, raw_b
    if np.ndim(tp_overlap) and cfg.sequence_parallel:  # the planner's rows, on or off
        t_f = np.where(tp_overlap, np.maximum(t_f / cfg.tp, t_f - gemm), t_f)
        t_b = np.where(tp_overlap, np.maximum(t_b / cfg.tp, t_b - 2 * gemm), t_b)
    elif tp_overlap and cfg.sequence_parallel:  # TE userbuffers: ring-exchanged in tp chunks
        t_f = np.maximum(t_f / cfg.tp, t_f - gemm)  # AG under QKV/FC1, RS under proj/FC2
        t_b = np.maximum(t_b / cfg.tp, t_b - 2 * gemm)  # under dgrad and wgrad GEMMs
    return t_f, t_b, raw_f, raw_b


def cp_times(model: ModelSpec, cfg, tokens, attention, links, system: System):
    """CP seconds per layer and micro-batch, (exposed forward, exposed backward, as
    issued). Ring: cp - 1 steps, each passing one K/V block (ledger.placement.comms)
    forward and K/V + dK/dV backward, each hidden under that step's share of attention
    (1/cp of it). Ulysses: the Q/K/V/O all-to-alls of ledger.placement.comms, exposed, the
    same backward. Both over the layers that attend; a hybrid's recurrent layers add
    their own all-to-alls (the rows after the first), exposed."""
    link = links["cp"]
    rows = cp_comms(model, cfg, tokens, 1.0, link)
    share = model.attention_layers / model.layers
    rec = sum(r.bytes for r in rows[1:]) / cfg.num_microbatches / (forward_passes(cfg) + 1)
    rec_t = rec / system.bandwidth(link) + (rec > 0) * 2 * (cfg.cp - 1) * system.latency(link)
    if cfg.cp_kind == "ring":
        block = ring_kv_block_bytes(tokens, kv_width(model), cfg.tp, cfg.act_bytes)
        hop = system.latency(link) + block / system.bandwidth(link)
        steps, per_step = cfg.cp - 1, attention / cfg.cp
        return (share * steps * np.maximum(0.0, hop - per_step) + rec_t,
                share * steps * np.maximum(0.0, 2 * hop - 2 * per_step) + rec_t,
                share * 3 * steps * hop + 2 * rec_t)
    per_pass = rows[0].bytes / cfg.num_microbatches \
        / (forward_passes(cfg) + 1)  # the forward's, the backward's and a recompute's
    t = per_pass / system.bandwidth(link) + share * 2 * (cfg.cp - 1) * system.latency(link)
    return t + rec_t, t + rec_t, 2 * (t + rec_t)


def ep_time(model: ModelSpec, cfg, tokens, links, system: System):
    """One direction's EP seconds per layer, averaged over the stack: the rows of
    ledger.placement.comms.ep_pass_comms (one MoE layer, one micro-batch, one direction;
    over the rank layout's links when ``links`` carries it) at alpha-beta, one call of
    ep - 1 point-to-point hops each (NCCL runs an all-to-all as grouped sends and
    receives, outside its collective cost model); times the MoE layers' share. The
    alltoall dispatcher's NCCL all-to-all at the rate nccl-tests measure it on the
    system (``System.a2a_bandwidth``, ``ledger.system.A2A``); across NICs its rows to
    other domains and to the own domain run at once and the slower bounds the call: "the
    portion that's going through the network will determine the global time" (sjeaugey,
    NVIDIA/nccl-tests issue #130, 2023-02-03; the same reading sets the NICs' measured
    share, ``A2A_SOURCES``). The allgather dispatcher's collectives and flex's DeepEP
    kernels inside an NVLink domain at ``System.bandwidth``; HybridEP's at the rate its
    own benchmark measures (``flex_bandwidth``), one kernel a call - its blocks write to
    every destination GPU at once (TMA stores from one persistent kernel, deepseek-ai/
    DeepEP hybrid-ep 94a9f8f6 docs/Hybrid-EP_Implementation.md sec. 8), so one latency
    for each of the dispatch and the combine, not ep - 1 hops; flex across NICs as
    ``flex_across_nics_s`` prices it."""
    lay = links.get("layout") or links["ep"]
    rows = ep_pass_comms(model, cfg, tokens, lay)
    kind = dispatcher(cfg)
    hybrid = kind == "flex" and ep_backend(cfg) == "hybridep"
    rate = system.a2a_bandwidth if kind == "alltoall" else system.bandwidth
    hops = np.maximum(cfg.ep, expert_tp(cfg)) - 1
    if hybrid:
        each = [r.bytes / flex_bandwidth(cfg, r.link, system) for r in rows]
        t = sum(each) + 2 * system.latency(rows[-1].link) * (sum(r.bytes for r in rows) > 0)
    else:
        each = [r.bytes / rate(r.link) + hops * system.latency(r.link) * (r.bytes > 0)
                for r in rows]
        t = sum(each)
    if len(rows) >= 2:  # the far rows (across NICs where they cross) before the near ones
        crossing = (np.asarray(rows[0].link) == "ib") & (np.asarray(rows[0].bytes) > 0)
        if kind == "alltoall" and hasattr(lay, "link"):  # the slower leg bounds the call
            t = np.where(crossing, t - each[0] - each[1] + np.maximum(each[0], each[1]), t)
        elif kind == "flex" and len(rows) == 2 and np.any(crossing):  # one copy a node,
            t = np.where(crossing, flex_across_nics_s(cfg, *rows, system), t)  # forwarded
    moe_layers = model.moe_layers if model.is_moe else model.layers
    return t * moe_layers / model.layers


def flex_across_nics_s(cfg, ib, nvl, system: System):
    """One direction's dispatch + combine of the flex dispatcher when its EP group spans
    NVLink domains: ``ib``, a token's one copy to each other domain its experts sit on,
    ``nvl``, the rows forwarded inside the domain (ledger.placement.experts._flex). DeepEP's
    normal kernels and HybridEP forward what arrives over RDMA to NVLink while it still
    arrives, so the slower of the two links bounds the call: their benchmarks report one
    time and name the "bottleneck" link. The NICs run at the share of their line rate
    the kernels' own benchmarks reach (``ledger.system.FLEX_INTER``: DeepEP 0.87,
    HybridEP 0.69 of a 400 Gb/s NIC), NVLink as ``flex_bandwidth`` has it; each of the two
    calls adds one latency of the NIC. At DeepEP's benchmark (H800, 4096 tokens, hidden
    7168, top-8 of 256 experts in 4 groups) its EP 32 and 64 times, which set DeepEP's
    share, come back within 2%, and its NVLink-bound EP 16, which does not, -5.2%
    (tests/test_flex_rate.py), where the two links summed with ep - 1
    hops of latency each, as the NCCL all-to-all's ranks are priced, came to 1.52x,
    1.82x and 1.74x them."""
    nic = system.inter_bytes_per_s * FLEX_INTER[ep_backend(cfg)]
    return np.maximum(ib.bytes / nic, nvl.bytes / flex_bandwidth(cfg, nvl.link, system)) \
        + 2 * system.latency("ib")


def flex_bandwidth(cfg, link, system: System):
    """Bytes/s the flex dispatcher's kernels reach on ``link`` ("nvlink" | "ib", or an
    array of them): DeepEP's at ``System.bandwidth``; HybridEP's at the share of the
    link's nominal rate its own benchmark measures, inside an NVLink domain
    ``ledger.system.FLEX_INTRA`` (0.71 of GB200's 900 GB/s, taken for every NVLink
    generation: no other published), across NICs ``FLEX_INTER``."""
    if ep_backend(cfg) != "hybridep":
        return system.bandwidth(link)
    intra = system.intra_bytes_per_s * FLEX_INTRA["hybridep"]
    inter = system.inter_bytes_per_s * FLEX_INTER["hybridep"]
    if isinstance(link, str):
        return intra if link == "nvlink" else inter
    return np.where(np.asarray(link) == "nvlink", intra, inter)


def shared_hidden_s(cfg, ep, fc1, fc2):
    """EP seconds per layer and micro-batch (forward, backward) that the shared experts
    hide under Megatron's --moe-shared-expert-overlap: the shared expert runs on its own
    stream, fc1 launched beside the dispatch all-to-all and fc2 beside the combine
    (megatron/core/transformer/moe/token_dispatcher.py L697-717, L859-873 for alltoall,
    L1972-1979, L2031-2050 for flex; shared_experts.py L163-198, L230-250 at d98e8a64dd); in
    the backward, autograd runs each one's input- and weight-gradient GEMMs beside the
    reverse all-to-all ("Backward launch order: probs A2A -> tokens A2A -> shared experts
    fc1", L713-714). ``ep``: one direction's dispatch + combine, half each; ``fc1`` /
    ``fc2``: the shared expert's forward GEMMs (``ledger.step.gemm.shared_gemms_s``). Off
    by default, with the allgather dispatcher, and under the combined 1F1B, which Megatron
    refuses beside it (transformer_config.py L1820-1825, L3040-3041)."""
    on = bool(getattr(cfg, "shared_expert_overlap", False)) \
        and dispatcher(cfg) in ("alltoall", "flex")
    on = on & ~np.asarray(getattr(cfg, "ep_overlap", False), dtype=bool)  # arrays: planner
    half = ep / 2
    fwd = np.minimum(half, fc1) + np.minimum(half, fc2)
    bwd = np.minimum(half, 2 * fc2) + np.minimum(half, 2 * fc1)
    return np.where(on, fwd, 0.0), np.where(on, bwd, 0.0)


def undelayed_wgrad_s(cfg, ep, routed):
    """Seconds one layer's combined-1F1B pair (``--overlap-moe-expert-parallel-comm``)
    loses without Megatron's --delay-wgrad-compute (off by default; ``combined_1f1b_s``
    adds it to the pair's middle slot). The pair's middle slot runs
    ``dispatch_fwd -> dispatch_bwd`` on the communication stream beside ``mlp_bwd ->
    mlp_bwd_dw -> mlp_fwd`` on the compute stream
    (megatron/core/models/common/model_chunk_schedule_plan.py L244-247, L271-281 at
    d98e8a64dd). Delayed, the experts' weight gradients (TE's ``backward_dw``,
    extensions/transformer_engine.py L1373-1374) run after the backward's dispatch is
    launched and hide it; not delayed, ``mlp_bwd`` holds them and the backward's dispatch
    waits for them: the slot takes max(D, 2R) + max(D, R) instead of max(2D, 3R), D one
    dispatch (half of ``ep``, one direction's all-to-alls), R the routed experts' forward
    GEMMs (``routed``; their backward twice that)."""
    half = ep / 2
    lost = np.maximum(half, 2 * routed) + np.maximum(half, routed) \
        - np.maximum(2 * half, 3 * routed)
    on = np.asarray(getattr(cfg, "ep_overlap", False), dtype=bool) \
        & ~np.asarray(getattr(cfg, "delay_wgrad", False), dtype=bool)
    return np.where(on, lost, 0.0)


def combined_1f1b_s(f_gpu, b_gpu, ep_f, ep_b, routed, sm_share, cfg):
    """GPU seconds of one layer's combined-1F1B pair (``--overlap-moe-expert-parallel-comm``:
    one micro-batch's forward beside another's backward) as Megatron schedules it, in three
    slots each ending before the next begins (models/common/model_chunk_schedule_plan.py
    L243-247, L261-301 at d98e8a64dd):

        comm_stream: combine_bwd      | dispatch_fwd -> dispatch_bwd       | combine_fwd
        comp_stream: pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd   | pre_dispatch_bwd

    ``pre_dispatch`` is the attention block, the pre-MLP norm, the router, the dispatcher's
    preprocessing and the shared experts (models/gpt/fine_grained_callables.py L67-150);
    ``mlp`` the routed experts (L178-203). So the first slot takes max(C_b, A_f), the last
    max(C_f, A_b), the middle the experts beside both dispatches (max(2D, 3R), delayed
    wgrad; ``undelayed_wgrad_s`` what it loses without); each slot's compute slowed by the
    SMs its all-to-alls take (``sm_share`` x the comm beside it). ``f_gpu`` / ``b_gpu``:
    the layer's forward / backward GPU seconds (its all-to-alls included: ``ep_f`` /
    ``ep_b``, dispatch and combine half each); ``routed``: the routed experts' forward
    GEMMs R (their backward 2R); A_f, A_b the rest. Non-GEMM work of the experts (their
    activation, permutes) is not split from the layer's and rides with A."""
    r = routed
    a_f = np.maximum(0.0, f_gpu - ep_f - r)
    a_b = np.maximum(0.0, b_gpu - ep_b - 2 * r)

    def slot(comm, comp):
        return np.maximum(comm, comp + sm_share * comm)

    d = (ep_f + ep_b) / 2  # the two dispatches of the middle slot
    return (slot(ep_b / 2, a_f) + slot(d, 3 * r) + slot(ep_f / 2, a_b)
            + undelayed_wgrad_s(cfg, (ep_f + ep_b) / 2, r))
