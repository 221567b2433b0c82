"""From bytes to seconds: FLOPs, step time, MFU and HFU of one placement on one system.

Model FLOPs per token (PaLM, Chowdhery et al. 2022, app. B, with the causal mask):

    6 * N_matmul          (6 = 2 multiply-add x (1 forward + 2 backward))
  + 6 * l * s * q_dim     (QK^T and AV, forward and backward, over the s/2 keys a causal
                           token sees on average; PaLM and Narayanan et al. 2021 eq. 3
                           count all s keys, 12 l s q_dim - Llama 3's reported 380 TFLOP/s
                           at 128K tokens adds up only with the causal count)

where N_matmul are the weights tokens multiply (attention, MLP, the top-k experts a token
visits, router, output layer; not the embedding lookup or norms). Hardware FLOPs add what
recompute repeats: full recompute (+1 forward of every layer, or of every n-th),
selective (+1 forward of the attention core; under torchtitan's per-op policy the GEMMs
it does not keep, ledger.arch.checkpointing). MFU counts model FLOPs, HFU hardware FLOPs.

The time of one micro-batch on one pipeline stage is the sum, per layer, of
  GEMMs      each GEMM of the layer at its own efficiency: the GPU's sustained GEMM share
             x prod over its three dimensions d/(d + d_half) (M = this GPU's
             tokens: micro-batch x seq / cp; N and K: the weight's shard under TP/EP)
  attention  QK^T and PV as the batched GEMMs they are (M = query tokens, N = key tokens
             of the chunk, K = head_dim for QK^T, v_head_dim for PV: MLA's widths);
             causal flash kernels skip the masked half and, in local layers, the blocks
             beyond the window or chunk (flops.keys_factor)
  elementwise  memory traffic: ``elementwise_traffic`` x the bytes the framework's own
             layer saves (ledger.parallel.activation_bytes_per_layer, no recompute) / HBM
  TP         bytes from ledger.placement.comms at alpha-beta per call; with --tp-overlap (TE's
             comm-GEMM overlap, needs SP) each collective hides under the GEMM it feeds
             except its first chunk of 1/tp
  CP         ring: each of the cp - 1 K/V steps hides under that step's attention block;
             Ulysses all-to-alls exposed
  EP         dispatch + combine all-to-alls, exposed
The pipeline turns micro-batch times into a makespan (ledger.pipeline.makespan; the split-backward
schedules run the weight-gradient GEMMs as their own W pass), adds the p2p transfers of
the steady state (Megatron's send/recv pairs block: p2p_communication._communicate waits
on its requests), and data parallelism hides what it can: ZeRO-3 gathers under the
layers' own compute (one gather per micro-batch is exposed, prefetch hides the rest),
per-micro-batch reduce-scatters on their own stream under every later forward and
backward (the last call is exposed), the step-end gradient reduction under the last
backward. The optimizer reads and writes its state once.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ledger.arch import (keys_factor, matmul_params_per_token, model_flops_per_token, op_share,
                         recurrent_flops_per_token)
from ledger.config import ParallelConfig, expert_tp
from ledger.errors import LedgerError
from ledger.model import ModelSpec
from ledger.pipeline import first_backward_s, pipeline_s
from ledger.placement import (Capacity, Layout, Placement, activation_bytes_per_layer,
                              block_layers, cp_comms,
                              ep_pass_comms, forward_passes, kv_width, place, rank_layers,
                              ring_kv_block_bytes, tp_comms)
from ledger.placement.offload import exposed_s
from ledger.step.dp import dp_split
from ledger.step.gemm import gemm_s, layer_gemms_s, recurrent_core_s
from ledger.system import System


@dataclass(frozen=True)
class Calibration:
    """The time model's constants; each is a physical quantity. ``gemm_half_balance`` and
    ``elementwise_traffic`` are fitted by one script, benchmarks/fit.py, on the declared
    calibration set 1 (ledger.validation: Korthikanti et al. 2022's eight A100 rows) and
    shipped as it prints them (its stage 2 fits the H100's GEMM share, in
    ledger.system); the rest are set from their sources, not fitted."""

    gemm_half_balance: float = 0.50  # GEMM dimension halving its efficiency, in units of
    # the GPU's machine balance (FLOP per HBM byte: A100 153, H100 SXM 295)
    elementwise_traffic: float = 4.0  # HBM bytes moved by non-GEMM kernels / activation bytes
    dp_overlap_hidden: float = 0.9  # share of the compute a DP collective can hide under
    # HBM kept back beyond what the framework's memory counts (its CUDA context, NCCL and
    # fragmentation are a cause of their own, ledger.frameworks): none
    memory_reserve: float = 0.0


DEFAULT = Calibration()


@dataclass(frozen=True)
class StepEstimate:
    step_time_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float  # model FLOP/s per GPU, in TFLOP/s
    hardware_tflops_per_gpu: float  # including recompute
    mfu: float
    hfu: float
    memory_per_gpu_bytes: float  # the peak rank's whole memory (placement.memory)
    memory_capacity_bytes: float  # HBM less Calibration.memory_reserve
    fits: bool
    breakdown: dict[str, float] = field(default_factory=dict)  # seconds per cause
    placement: Placement | None = None
    capacity: Capacity | None = None


def recompute_flops_per_token(model: ModelSpec, recompute: str, causal: bool = True,
                              share: float | None = None, every: int = 1) -> float:
    """What recompute adds: one more forward of every layer (full; of every ``every``-th
    layer), of the attention core only (selective, Korthikanti et al. 2022 sec. 5), or,
    under a per-op policy, of the ``share`` of the layers' GEMMs it does not keep
    (``ledger.arch.op_share``)."""
    q_dim = model.heads * model.head_dim
    attn_fwd = (2 if causal else 4) * model.attention_layers * model.seq_len * q_dim
    layer_params = matmul_params_per_token(model) - model.vocab * model.hidden
    if recompute == "full":  # the layers' forward again, recurrent cores included
        return (2 * layer_params + attn_fwd + recurrent_flops_per_token(model) / 3) / every
    if recompute == "selective" and share is not None:
        return 2 * layer_params * share
    return attn_fwd if recompute == "selective" else 0.0


@dataclass(frozen=True)
class _Layer:
    """Seconds one layer takes for one micro-batch on one GPU, by cause and direction."""

    gemm: object  # forward GEMMs; the backward runs them twice (input and weight grads)
    attention: object  # forward attention core; backward twice
    elementwise: object
    core_elementwise: object  # the attention core's share: selective recompute redoes it
    tp_f: object  # TP comm exposed in forward, and in backward
    tp_b: object
    cp_f: object
    cp_b: object
    ep: object  # one direction's EP all-to-alls
    op_share: float | None = None  # selective under a per-op policy: its GEMMs run again
    every: int = 1  # full recompute of every n-th layer

    def forward(self) -> dict:
        return {"compute": self.gemm + self.attention, "elementwise": self.elementwise,
                "tp_comm": self.tp_f, "cp_comm": self.cp_f, "ep_comm": self.ep}

    def backward(self, recompute: str) -> dict:
        """Twice the forward's math; TP's conjugate collectives; plus recompute."""
        out = {"compute": 2 * (self.gemm + self.attention), "elementwise": 2 * self.elementwise,
               "tp_comm": self.tp_b, "cp_comm": self.cp_b, "ep_comm": self.ep}
        if recompute == "full":  # the forward again, its TP collectives included
            for k, v in self.forward().items():
                out[k] = out[k] + v / self.every  # not +=: with arrays it writes into self
        elif recompute == "selective" and self.op_share is not None:  # torchtitan's op
            # policy: the GEMMs it does not keep and every elementwise op, not attention
            out["compute"] = out["compute"] + self.gemm * self.op_share
            out["elementwise"] = out["elementwise"] + self.elementwise
        elif recompute == "selective":  # the attention core only
            out["compute"] = out["compute"] + self.attention
            out["elementwise"] = out["elementwise"] + self.core_elementwise
        return out


def _tp_times(cfg, s_act, gemm, links, system, tp_overlap: bool):
    """TP seconds per layer and micro-batch, forward and backward, from ledger.placement.comms'
    rows. One forward pass moves 2 RS + 2 AG under SP (2 all-reduces without): the
    reduce-scatters' bytes split over the F + 1 passes that make them (F forwards, F = 2
    under full recompute, and the backward), twice; the backward is everything else
    (conjugates and any input re-gather) less the recomputed forward, which
    ``_Layer.backward`` adds itself. Latency: 4 calls of (tp - 1) hops per direction,
    pro rata to bytes."""
    rows = tp_comms(cfg, s_act, 1.0, links["tp"])
    m, passes = cfg.num_microbatches, forward_passes(cfg) + 1
    total = sum(r.bytes for r in rows) / m
    fwd = total / passes
    for r in rows:
        if r.kind == "reduce_scatter":
            fwd = 2 * r.bytes / m / passes
    total = total - (passes - 2) * fwd  # the recomputed forward is not the backward's
    bw, lat = system.bandwidth(links["tp"]), system.latency(links["tp"])
    hops = 4 * (cfg.tp - 1) * lat
    t_f = fwd / bw + hops
    t_b = (total - fwd) / bw + hops * (total - fwd) / np.maximum(fwd, 1e-300)
    if tp_overlap and cfg.sequence_parallel:  # TE userbuffers: ring-exchanged in tp chunks
        t_f = np.maximum(t_f / cfg.tp, t_f - gemm)  # AG under QKV/FC1, RS under proj/FC2
        t_b = np.maximum(t_b / cfg.tp, t_b - 2 * gemm)  # under dgrad and wgrad GEMMs
    return t_f, t_b


def _cp_times(model, cfg, tokens, attention, links, system):
    """Ring: cp - 1 steps, each passing one K/V block (ledger.placement.comms) forward and K/V +
    dK/dV backward, each hidden under that step's share of attention (1/cp of it).
    Ulysses: the Q/K/V/O all-to-alls of ledger.placement.comms, exposed, the same backward."""
    link = links["cp"]
    rows = cp_comms(model, cfg, tokens, 1.0, link)
    share = model.attention_layers / model.layers  # the layers that attend; a hybrid's
    rec = sum(r.bytes for r in rows[1:]) / cfg.num_microbatches / (forward_passes(cfg) + 1)
    rec_t = rec / system.bandwidth(link) + (rec > 0) * 2 * (cfg.cp - 1) * system.latency(link)
    if cfg.cp_kind == "ring":  # recurrent layers' all-to-alls, exposed (rows[1:])
        block = ring_kv_block_bytes(tokens, kv_width(model), cfg.tp, cfg.act_bytes)
        hop = system.latency(link) + block / system.bandwidth(link)
        steps, per_step = cfg.cp - 1, attention / cfg.cp
        return (share * steps * np.maximum(0.0, hop - per_step) + rec_t,
                share * steps * np.maximum(0.0, 2 * hop - 2 * per_step) + rec_t)
    per_pass = rows[0].bytes / cfg.num_microbatches \
        / (forward_passes(cfg) + 1)  # the forward's, the backward's and a recompute's
    t = per_pass / system.bandwidth(link) + share * 2 * (cfg.cp - 1) * system.latency(link)
    return t + rec_t, t + rec_t


def _layer_times(model: ModelSpec, cfg, system: System, links: dict, cal: Calibration,
                 tp_overlap: bool = False) -> _Layer:
    """One layer, one micro-batch, one GPU. ``cfg`` may hold numpy arrays for its sizes
    (the planner's grid); its categorical fields are plain values."""
    gpu = system.gpu
    tokens = model.seq_len * cfg.micro_batch / cfg.cp  # this GPU's tokens per micro-batch
    gemm = layer_gemms_s(model, cfg, tokens, gpu, cal)
    heads, d, dv = model.heads / cfg.tp, model.head_dim, model.v_head_dim  # QK, PV widths
    keys = model.seq_len / cfg.cp  # one chunk's keys (ring) or the whole sequence (Ulysses)
    if cfg.cp_kind == "ulysses":
        heads, keys, q_tokens = heads / cfg.cp, model.seq_len, model.seq_len * cfg.micro_batch
    else:
        q_tokens = tokens
    # causal flash kernels skip the masked half, and local layers' blocks beyond their
    # window or chunk (flops.keys_factor); a materialised s x s score matrix does neither
    skip = 0.5 * keys_factor(model) if cfg.flash_attention else 1.0
    per_chunk = gemm_s(q_tokens, keys, d, gpu, cal) + gemm_s(q_tokens, dv, keys, gpu, cal)
    if model.global_attention is not None:  # global layers' own head widths (Gemma 4)
        views = [(n, model.attention_of(k)) for k, n in model.kind_counts.items()
                 if k.attention]
        per_chunk = sum(n * (gemm_s(q_tokens, keys, m.head_dim, gpu, cal)
                             + gemm_s(q_tokens, m.v_head_dim, keys, gpu, cal))
                        for n, m in views) / model.attention_layers
    chunks = 1 if cfg.cp_kind == "ulysses" else cfg.cp
    # the layers that attend, and the recurrent mixers' chunked cores (ledger.step.gemm)
    attention = heads * chunks * per_chunk * skip * model.attention_layers / model.layers \
        + recurrent_core_s(model, cfg, tokens, gpu, cal)

    def act(flash: bool):  # the bytes the framework's own layer writes (ledger.arch.activations),
        # without dropout masks, as benchmarks/fit.py calibrated elementwise_traffic on them
        return activation_bytes_per_layer(model, cfg, flash=flash, recompute="none",
                                          dropout=0.0)
    traffic = cal.elementwise_traffic / gpu.hbm_bytes_per_s
    saved = act(cfg.flash_attention)
    elementwise = traffic * saved
    core = traffic * (saved - act(True)) if not cfg.flash_attention else 0.0 * saved
    s_act = tokens * model.hidden * cfg.act_bytes
    tp_f, tp_b = _tp_times(cfg, s_act, gemm, links, system, tp_overlap)
    blocks = block_layers(model) / model.layers  # a one-block layer issues half of them
    tp_f, tp_b = tp_f * blocks, tp_b * blocks
    cp_f, cp_b = _cp_times(model, cfg, tokens, attention, links, system)
    ep = _ep_time(model, cfg, tokens, links, system)
    return _Layer(gemm, attention, elementwise, core, tp_f, tp_b, cp_f, cp_b, ep,
                  op_share(model, cfg), getattr(cfg, "recompute_every", 1))


def _ep_time(model: ModelSpec, cfg, tokens, links, system: System):
    """One direction's EP seconds per layer, averaged over the stack: the rows of
    ledger.placement.comms.ep_pass_comms (one MoE layer, one micro-batch, one direction; over the
    rank layout's links when ``links`` carries it) at alpha-beta, one call of ep - 1
    hops each, exposed; times the MoE layers' share."""
    lay = links.get("layout") or links["ep"]
    rows = ep_pass_comms(model, cfg, tokens, lay)
    t = sum(r.bytes / system.bandwidth(r.link)
            + (np.maximum(cfg.ep, expert_tp(cfg)) - 1) * system.latency(r.link) * (r.bytes > 0)
            for r in rows)
    moe_layers = model.moe_layers if model.is_moe else model.layers
    return t * moe_layers / model.layers


@dataclass(frozen=True)
class Structure:
    """What the time model needs from the layout, per placement (numbers or arrays)."""

    links: dict  # axis -> "nvlink" | "ib" (or arrays of them) for tp, cp, ep, pp; and
    # "layout": the rank Layout, for the EP rows' links (else every EP row on links["ep"])
    max_layers: object  # most layers on any pipeline rank
    last_layers: object  # layers on the last rank, which also runs the output layer
    dp_layer_s: tuple  # DP traffic layer by layer: (ZeRO-3 gathers in the forwards, its
    # re-gathers in the backwards, per-micro-batch reduce-scatters, the last one's call)
    dp_grad_s: object  # gradient reduction at the step's end (DDP, ZeRO-1, unsharded)
    dp_param_s: object  # ZeRO-1/2's parameter all-gather after the optimizer step
    dp_gather_s: object  # one layer's ZeRO-3 parameter gather (the one prefetch cannot hide)
    state_bytes: object  # resident state of the heaviest stage (for the optimizer step)
    offload_s: object = 0.0  # CPU offload: host-link seconds the step waits for


def step_times(model: ModelSpec, cfg, system: System, st: Structure, cal: Calibration,
               tp_overlap: bool) -> dict:
    """Step time and its causes for one placement or a grid of them."""
    lt = _layer_times(model, cfg, system, st.links, cal, tp_overlap)
    fwd, bwd = lt.forward(), lt.backward(cfg.recompute)
    f_layer, b_layer = sum(fwd.values()), sum(bwd.values())
    per_layer = f_layer + b_layer
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    # DeepSeek-V3's MTP modules run with the output head (DeepSeek-V3 report sec. 2.2;
    # ledger.placement.stages): each one more layer of the stack's kind and one more output head
    # (its 2h x h projection left out)
    mtp = model.mtp_layers
    out_f = (1 + mtp) * gemm_s(tokens, model.vocab / cfg.tp, model.hidden, system.gpu, cal)
    out_layer = 3 * out_f  # logits, forward and backward, on the last stage
    last_layers = st.last_layers + mtp
    last = last_layers * per_layer + out_layer
    last_critical = last >= st.max_layers * per_layer  # the busiest rank sets the pace
    layers = np.where(last_critical, last_layers, st.max_layers)
    t_f = layers * f_layer + last_critical * out_f
    t_b = layers * b_layer + last_critical * 2 * out_f
    # a split backward's W pass: the weight-gradient GEMMs alone (one forward's GEMMs);
    # the input-gradient half I keeps the rest (attention, elementwise, TP, recompute)
    t_w = layers * lt.gemm + last_critical * out_f
    # Megatron's scatter/gather p2p (Narayanan et al. 2021 sec. 4.1): each TP rank sends
    # 1/tp of the boundary tensor across the pipeline link (already so under SP)
    s_pp = tokens * model.hidden * cfg.act_bytes / cfg.tp
    pp_link = st.links["pp"]
    p2p = (cfg.pp > 1) * (system.latency(pp_link) + s_pp / system.bandwidth(pp_link))
    m = cfg.num_microbatches
    pipeline = pipeline_s(cfg.schedule, cfg.pp, m, cfg.vp, t_f, t_b, p2p, t_w)
    steady_p2p = 2 * m * cfg.vp * p2p  # each micro-batch's send/recv pair, both directions
    hide = cal.dp_overlap_hidden
    first_gather = m * st.dp_gather_s  # prefetch hides every layer's gather but the first
    fwd_s, bwd_s, rs_s, rs_last_s = st.dp_layer_s  # gathers: under their own direction
    # A micro-batch's reduce-scatters run on their own stream and only the last backward
    # waits for them (torch FSDP2: _fsdp_param_group.py L92 reduce_scatter_stream;
    # _fully_shard.py L403-411 set_is_last_backward; a unit waits for its previous
    # reduction only before launching its next, L679/L784-787): they hide under every
    # later forward and backward and every idle slot, from the first rank's first
    # backward to the step's end (in 1F1B: m t_b + (m - 1) t_f); the last layer's call of
    # the last micro-batch is exposed.
    t_up = t_b - t_w if cfg.schedule in ("zb-h1", "zb-v", "interleaved-zb") else t_b
    rs_window = pipeline - first_backward_s(cfg.schedule, cfg.pp, m, cfg.vp, t_f, t_up)
    layerwise = np.maximum(0.0, fwd_s - first_gather - m * t_f * hide) + first_gather \
        + np.maximum(0.0, bwd_s - m * t_b * hide) \
        + np.maximum(rs_last_s, rs_s - rs_window * hide)
    # the step-end reduction under the last backward (Megatron's --overlap-grad-reduce),
    # the parameter gather under the first forward (--overlap-param-gather)
    step_end = np.maximum(0.0, st.dp_grad_s - t_b * hide) \
        + np.maximum(0.0, st.dp_param_s - t_f * hide)
    optim = st.state_bytes / system.gpu.hbm_bytes_per_s  # read all of it, write it back
    out = {k: (fwd[k] + bwd[k]) * layers * m for k in fwd}
    out["compute"] = out["compute"] + last_critical * out_layer * m
    out |= {"pp_bubble": pipeline - m * (t_f + t_b), "pp_comm": steady_p2p,
            "dp_comm": layerwise + step_end, "optimizer": optim}
    out["offload"] = st.offload_s  # ledger.placement.offload: the exposed host-link rows
    out["step_time_s"] = pipeline + steady_p2p + layerwise + step_end + optim + st.offload_s
    return out


def structure(model: ModelSpec, cfg: ParallelConfig, system: System, pl: Placement) -> Structure:
    """The Structure of one placement, from its layout and ledger."""
    lay = Layout(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep, etp=cfg.etp,
                 hsdp_shard=cfg.hsdp_shard, gpus_per_node=system.gpus_per_node)
    held = rank_layers(model.layers, cfg.pp, cfg.vp, cfg.schedule == "zb-v")
    hs = pl.heaviest_stage
    dp_rows = [c for c in pl.comms if c.axis == "dp"]
    layer, grads, params, gather = dp_split(dp_rows, cfg, system, model.layers / cfg.pp)
    return Structure(
        links={axis: lay.link(axis) for axis in ("tp", "cp", "ep", "pp")} | {"layout": lay},
        max_layers=max(held), last_layers=held[0 if cfg.schedule == "zb-v" else -1],
        dp_layer_s=layer, dp_grad_s=grads, dp_param_s=params, dp_gather_s=gather,
        state_bytes=hs.params_bytes + hs.grads_bytes + 2 * hs.optim_bytes,
        offload_s=exposed_s(pl.host_transfers, system.host_bandwidth()))


def estimate(model: ModelSpec, cfg: ParallelConfig, system: System,
             cal: Calibration = DEFAULT, tp_overlap: bool = False,
             precision: str | None = None, optimizer: str = "adam") -> StepEstimate:
    """Step time, throughput, MFU/HFU, memory and where the time goes."""
    if precision is not None and cfg.precision is None:  # the GEMMs' rate reads it there
        cfg = replace(cfg, precision=precision)
    pl = place(model, cfg, precision=precision, optimizer=optimizer,
               gpus_per_node=system.gpus_per_node)
    st = structure(model, cfg, system, pl)
    t = {k: float(v) for k, v in step_times(model, cfg, system, st, cal, tp_overlap).items()}
    step = t.pop("step_time_s")
    global_tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
    world, peak = cfg.world, system.gpu.bf16_flops
    model_flops = model_flops_per_token(model) * global_tokens
    hw_flops = model_flops + recompute_flops_per_token(
        model, cfg.recompute, share=op_share(model, cfg), every=cfg.recompute_every) \
        * global_tokens
    hbm = system.gpu.hbm_bytes
    room = Capacity(system.gpu.name, hbm, hbm * cal.memory_reserve)
    capacity = room.usable_bytes
    return StepEstimate(
        step_time_s=step, tokens_per_s_per_gpu=global_tokens / world / step,
        tflops_per_gpu=model_flops / world / step / 1e12,
        hardware_tflops_per_gpu=hw_flops / world / step / 1e12,
        mfu=model_flops / (world * peak * step), hfu=hw_flops / (world * peak * step),
        memory_per_gpu_bytes=float(pl.peak_bytes), memory_capacity_bytes=capacity,
        fits=bool(pl.peak_bytes <= capacity),
        breakdown={k: v for k, v in t.items() if v > 1e-12 or k == "compute"},
        placement=pl, capacity=room)


def microbatches_for(global_batch: int, dp: int, micro_batch: int) -> int:
    """num_microbatches = global batch (sequences) / (dp x micro_batch), exactly."""
    if global_batch % (dp * micro_batch):
        raise LedgerError("global_batch", f"global_batch({global_batch}) is not divisible by "
                                          f"dp({dp}) * micro_batch({micro_batch})")
    return global_batch // (dp * micro_batch)
