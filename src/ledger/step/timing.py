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
it does not keep, ledger.arch.checkpointing). MFU counts model FLOPs, HFU hardware FLOPs;
a fine-tune's model FLOPs leave out the weight gradients its frozen base skips and add
its adapters' (``ledger.arch.adapters.finetune_flops_per_token``), and its GEMMs are
timed so (``ledger.step.tuned``).

The time of one micro-batch on one pipeline stage is the sum, per layer, of
  GEMMs      each GEMM of the layer at its own efficiency: the GPU's sustained GEMM share
             x prod over its three dimensions d/(d + d_half) (M = this GPU's
             tokens: micro-batch x seq / cp; N and K: the weight's shard under TP/EP)
  attention  a fused (flash) core at the rate cuDNN's kernel is measured at on the GPU's
             die (ledger.system.attention: a share of the BF16 peak by key length, the
             forward's 2 q k (d + dv) FLOPs a head, the backward's 2.5x them); else (scores
             materialised, or no measurement) QK^T and PV as the batched GEMMs they are
             (M = query tokens, N = key tokens of the chunk, K = head_dim for QK^T,
             v_head_dim for PV: MLA's widths), the backward twice the forward; causal flash
             kernels skip the masked half and, in local layers, the blocks beyond the
             window or chunk (flops.keys_factor)
  loss       the loss's passes over the logits on the output layer's stage, at HBM
             bandwidth (ledger.frameworks.losses: Loss.traffic_bytes)
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

from ledger.arch import (finetune_flops_per_token, matmul_params_per_token, op_share,
                         recurrent_flops_per_token, selected)
from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.model import ModelSpec
from ledger.frameworks import of as framework_of
from ledger.frameworks.losses import loss as loss_of
from ledger.pipeline import SPLIT_BACKWARD, first_backward_s, overlap_pairs, pipeline_s, visits
from ledger.placement import Capacity, Layout, Placement, pace, place
from ledger.placement.footprint import loss_name
from ledger.placement.layers import recomputed_share
from ledger.step.exposed import exposures
from ledger.placement import optim_offload
from ledger.placement.offload import cpu_step_s, link_s
from ledger.step.dp import dp_split, nccl_system
from ledger.step.gemm import gemm_s, head_peak
from ledger.step.host import for_host, host_excess_s, launched_s
from ledger.step.optimizer import muon_s
from ledger.step.recompute import rerun_flops_per_token
from ledger.step.layer_comms import combined_1f1b_s
from ledger.step.layer_time import layer_times
from ledger.step.ep_sms import ep_sm_share
from ledger.step.tuned import head_wgrad_share
from ledger.system import System



@dataclass(frozen=True)
class Calibration:
    """The time model's constants; each is a physical quantity. ``gemm_half_balance`` and
    ``elementwise_traffic`` are fitted by one script, benchmarks/fit.py, on the declared
    calibration set 1 (ledger.validation: Korthikanti et al. 2022's eight A100 rows) and
    shipped as it prints them (its stage 2 fits the H100's GEMM share and its stage 4 the
    Blackwell parts' one share, both in ledger.system); the host's five (``host_*_s``) are
    its stage 3, on the declared Megatron-Bridge calibration rows, and
    ``grouped_gemm_share`` its stage 4 with the Blackwell share on the same rows; the rest
    are set from their sources, not fitted."""

    gemm_half_balance: float = 0.60  # GEMM dimension halving its efficiency, in units of
    # the GPU's machine balance (FLOP per HBM byte: A100 153, H100 SXM 295)
    elementwise_traffic: float = 4.0  # HBM bytes moved by non-GEMM kernels / activation bytes
    dp_overlap_hidden: float = 0.9  # share of the compute a DP collective can hide under
    # the host's seconds per eager block, forward + backward, one micro-batch
    # (ledger.step.host): fitted by benchmarks/fit.py stage 3 on the declared
    # Megatron-Bridge calibration rows
    host_block_s: float = 0.0005  # an attention block, a dense MLP, a Mamba mixer
    host_router_s: float = 0.004  # a MoE router with its preprocessing
    host_moe_s: float = 0.001  # a MoE block's dispatch, grouped GEMMs and combine
    host_expert_s: float = 0.0004  # and per routed expert a GPU holds (its own GEMMs, casts)
    # and what a MoE layer's forward loses at its dispatch where the host cannot run
    # through it: combined 1F1B's schedule nodes or DeepEP's normal dispatch (host.stalls)
    host_stall_s: float = 0.006
    # a Grace (Arm Neoverse V2) host's seconds for the same blocks over an x86 host's
    # (System.host_cpu): fitted by benchmarks/fit.py stage 5 on the same calibration rows
    grace_host_scale: float = 1.25
    # the routed experts' grouped GEMMs' rate over a dense GEMM's (gemm.kind_gemms_s,
    # Framework.grouped_gemm_fitted), fitted by benchmarks/fit.py stage 4: not a kernel
    # measurement (DeepGEMM README @ 4cc65afa: its grouped FP8 kernels at its dense rate,
    # 1,288 against 1,304 TFLOP/s at 4,096 rows a group)
    grouped_gemm_share: float = 0.6
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
    memory_per_gpu_bytes: float  # what the worst rank must hold (MemoryBreakdown.required_bytes)
    memory_capacity_bytes: float  # HBM less Calibration.memory_reserve
    fits: bool
    breakdown: dict[str, float] = field(default_factory=dict)  # seconds per cause
    placement: Placement | None = None
    capacity: Capacity | None = None
    exposed: tuple = ()  # ledger.step.exposed.Exposed rows: where exposed communication comes from


def recompute_flops_per_token(model: ModelSpec, recompute: str, causal: bool = True,
                              share: float | None = None, every: int = 1,
                              modules: tuple[str, ...] | None = None) -> float:
    """What recompute adds: one more forward of every layer (full; of every ``every``-th
    layer), of the selected modules (selective: ``modules``, Megatron's
    ``--recompute-modules``, by default the attention core only, Korthikanti et al. 2022
    sec. 5; ``ledger.step.recompute``), or, under a per-op policy, of the ``share`` of the
    layers' GEMMs it does not keep (``ledger.arch.op_share``)."""
    q_dim = model.heads * model.head_dim
    attn_fwd = (2 if causal else 4) * model.attention_layers * model.seq_len * q_dim
    layer_params = matmul_params_per_token(model) - model.vocab * model.hidden
    if recompute == "full":  # the layers' forward again, recurrent cores included
        return (2 * layer_params + attn_fwd + recurrent_flops_per_token(model) / 3) / every
    if recompute == "selective" and share is not None:
        return 2 * layer_params * share
    return rerun_flops_per_token(model, selected(recompute, modules), causal)


@dataclass(frozen=True)
class Structure:
    """What the time model needs from the layout, per placement (numbers or arrays)."""

    links: dict  # axis -> "nvlink" | "ib" (or arrays of them) for tp, cp, ep, pp; and
    # "layout": the rank Layout, for the EP rows' links (else every EP row on links["ep"])
    max_layers: object  # layers a micro-batch passes on the busiest rank
    head_layers: object  # ... on the busiest rank holding the output head, MTP modules in
    head_share: object  # output heads a micro-batch passes there (DualPipe: half of them)
    dp_layer_s: tuple  # DP traffic layer by layer: (ZeRO-3 gathers in the forwards, its
    # re-gathers in the backwards, per-micro-batch reduce-scatters, the last one's call)
    dp_grad_s: object  # gradient reduction at the step's end (DDP, ZeRO-1, unsharded)
    dp_param_s: object  # ZeRO-1/2's parameter all-gather after the optimizer step
    dp_gather_s: object  # one layer's ZeRO-3 parameter gather (the one prefetch cannot hide)
    state_bytes: object  # resident state of the heaviest stage (for the optimizer step)
    offload_s: object = 0.0  # CPU offload: host-link seconds the step waits for
    offload_hidden_s: object = 0.0  # and those under the forward and backward
    cpu_step_s: object = 0.0  # CPU offload: the host's optimizer step (exposed)
    muon_s: object = 0.0  # Muon's Newton-Schulz GEMMs and gathers (ledger.step.optimizer)


def pair_s(t_pair, comm, sm_share):
    """An overlapped forward-backward pair under DualPipe (its F&B chunk pair; Megatron's
    combined 1F1B runs in slots, ``ledger.step.layer_comms.combined_1f1b_s``):
    each pass's all-to-alls run while the other pass computes, on ``sm_share`` of the SMs
    the compute gives up while they run: max(comm, compute + sm_share x comm), compute =
    the pair's time less its all-to-alls (DeepSeek-V3 report sec. 3.2.1, fig. 4)."""
    return np.maximum(comm, t_pair - comm + sm_share * comm)


def step_times(model: ModelSpec, cfg, system: System, st: Structure, cal: Calibration,
               tp_overlap: bool) -> dict:
    """Step time and its causes for one placement or a grid of them; ``exposed``: per
    collective, (seconds exposed, seconds issued), for ``ledger.step.exposed``."""
    lt = layer_times(model, cfg, system, st.links, cal, tp_overlap)
    fwd, bwd = lt.forward(), lt.backward(cfg.recompute)
    host_cal = for_host(cal, system)  # the host's seconds on this system's CPU
    fwd["host"], bwd["host"] = host_excess_s(model, cfg, host_cal, sum(fwd.values()),
                                             sum(bwd.values()), lt.routed + fwd["ep_comm"],
                                             fwd["ep_comm"] / 2, system.gpu)
    f_layer, b_layer = sum(fwd.values()), sum(bwd.values())
    per_layer = f_layer + b_layer
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    # DeepSeek-V3's MTP modules run with the output head (DeepSeek-V3 report sec. 2.2;
    # ledger.placement.stages): each one more layer of the stack's kind and one more output head
    # (its 2h x h projection left out)
    heads = st.head_share * (1 + model.mtp_layers)
    out_f = heads * gemm_s(tokens, model.vocab / cfg.tp, model.hidden, system.gpu, cal,
                           peak=head_peak(cfg, system.gpu))  # BF16, or MXFP8 (fp8_head)
    out_w = out_f * head_wgrad_share(model, getattr(cfg, "finetune", None))
    # the loss's passes over the logits (ledger.frameworks.losses: Loss.traffic_bytes)
    loss_f, loss_b = (heads * tokens * model.vocab / cfg.tp * b / system.gpu.hbm_bytes_per_s
                      for b in loss_traffic(cfg))
    out_layer = 2 * out_f + out_w  # logits, forward and backward, on the last stage
    last = st.head_layers * per_layer + out_layer + loss_f + loss_b
    last_critical = last >= st.max_layers * per_layer  # the busiest rank sets the pace
    layers = np.where(last_critical, st.head_layers, st.max_layers)
    t_f = layers * f_layer + last_critical * (out_f + loss_f)
    t_b = layers * b_layer + last_critical * (out_f + out_w + loss_b)
    # a split backward's W pass: the weight-gradient GEMMs alone; the input-gradient half
    # I keeps the rest (attention, elementwise, TP, recompute)
    t_w = layers * lt.wgrad + last_critical * out_w
    ep_pair = layers * (fwd["ep_comm"] + bwd["ep_comm"])  # a pair's all-to-alls
    overlap_ep = np.asarray(getattr(cfg, "ep_overlap", False), dtype=bool)  # arrays: planner
    # a pair's passes are launched by one host thread: it takes at least their host time
    # (ledger.step.host), its all-to-alls hidden under the GPU's work, not the host's
    host_pair = layers * sum(launched_s(model, cfg, host_cal, system.gpu))
    gpu_pair = t_f + t_b - layers * (fwd["host"] + bwd["host"])
    sm = ep_sm_share(cfg, system)
    if cfg.schedule in ("dualpipe", "dualpipev"):  # the F&B chunk pair hides either's
        # all-to-alls under the other's compute (DeepSeek-V3 report fig. 4)
        overlapped = pair_s(gpu_pair, ep_pair, sm)
    else:  # Megatron's combined 1F1B: its three slots (ledger.step.layer_comms)
        f_gpu, b_gpu = f_layer - fwd["host"], b_layer - bwd["host"]
        overlapped = gpu_pair + layers * (combined_1f1b_s(
            f_gpu, b_gpu, fwd["ep_comm"], bwd["ep_comm"], lt.routed, sm, cfg)
            - f_gpu - b_gpu)
    t_fb = np.where(overlap_ep, np.maximum(np.minimum(overlapped, gpu_pair), host_pair),
                    t_f + t_b)
    # Megatron's scatter/gather p2p (Narayanan et al. 2021 sec. 4.1): each TP rank sends
    # 1/tp of the boundary tensor across the pipeline link (already so under SP)
    s_pp = tokens * model.hidden * cfg.act_bytes / cfg.tp
    pp_link = st.links["pp"]
    p2p = (cfg.pp > 1) * (system.latency(pp_link) + s_pp / system.bandwidth(pp_link))
    m, chunks = cfg.num_microbatches, visits(cfg.schedule, cfg.vp)
    pipeline = pipeline_s(cfg.schedule, cfg.pp, m, cfg.vp, t_f, t_b, p2p, t_w, t_fb)
    paired = cfg.schedule in ("1f1b", "interleaved", "dualpipe", "dualpipev")
    hidden_ep = paired * overlap_pairs(cfg.schedule, cfg.pp, m, cfg.vp) \
        * (t_f + t_b - t_fb) / chunks
    # each micro-batch's send/recv pair, both directions (DualPipe's pairs hide them);
    # overlapped (Megatron's overlap_p2p_comm, interleaved), each hides under the chunk
    # computing beside it and only what outlasts that chunk is exposed
    blocking = 2 * m * chunks * p2p * ~(overlap_ep & (cfg.schedule in ("dualpipe",
                                                                       "dualpipev")))
    outlast = m * chunks * (np.maximum(0.0, p2p - t_f / chunks)
                            + np.maximum(0.0, p2p - t_b / chunks))
    steady_p2p = np.where(np.asarray(getattr(cfg, "overlap_p2p", False), dtype=bool),
                          np.minimum(outlast, blocking), blocking)
    out = {k: (fwd[k] + bwd[k]) * layers * m for k in fwd}
    out["compute"] = out["compute"] + last_critical * out_layer * m
    out["elementwise"] = out["elementwise"] + last_critical * (loss_f + loss_b) * m
    ep_issued = out["ep_comm"] + (lt.ep_hidden_f + lt.ep_hidden_b) * layers * m  # before
    # the shared experts hid any of it
    out["ep_comm"] = out["ep_comm"] - hidden_ep
    dp, step_dp = _dp_exposed(cfg, st, cal, pipeline, m, t_f, t_b, t_w)
    optim = st.state_bytes / system.gpu.hbm_bytes_per_s + st.muon_s  # read all of it, write
    # it back; Muon's orthogonalisation after it
    out |= {"pp_bubble": pipeline - (m * (t_f + t_b) - hidden_ep), "pp_comm": steady_p2p,
            "dp_comm": step_dp, "optimizer": optim}
    # ledger.placement.offload: the exposed host-link rows, and what the overlapped ones
    # (on the copy engines, beside the compute) outlast of the forward and backward
    offload = st.offload_s + np.maximum(0.0, st.offload_hidden_s
                                        - m * (t_f + t_b) * cal.dp_overlap_hidden)
    out |= {"offload": offload, "cpu_optim": st.cpu_step_s}
    out["step_time_s"] = pipeline + steady_p2p + step_dp + optim + offload + st.cpu_step_s
    out["exposed"] = dp | {
        "tp": (out["tp_comm"], lt.tp_issued * layers * m),
        "cp": (out["cp_comm"], lt.cp_issued * layers * m),
        "ep": (out["ep_comm"], ep_issued), "pp": (steady_p2p, steady_p2p)}
    return out


def loss_traffic(cfg) -> tuple:
    """HBM bytes per logit of the config's loss, (forward, backward) (``Loss.traffic_bytes``):
    its own loss, or the framework's (``footprint.loss_name``) - the TP loss where tp > 1,
    element by element on the planner's grid."""
    if getattr(cfg, "loss", None) is not None or np.ndim(cfg.tp) == 0:
        return loss_of(loss_name(cfg, framework_of(cfg))).traffic_bytes(cfg.act_bytes)
    fw, compiled = framework_of(cfg), getattr(cfg, "compile", False)
    one, many = (loss_of(fw.loss_for(tp, compiled)).traffic_bytes(cfg.act_bytes)
                 for tp in (1, 2))
    return tuple(np.where(np.asarray(cfg.tp) > 1, b, a) for a, b in zip(one, many))


def _dp_exposed(cfg, st: Structure, cal: Calibration, pipeline, m, t_f, t_b, t_w):
    """DP seconds exposed, per kind of call ((exposed, issued)), and their sum. Overlapped
    (``cfg.overlap_grad_reduce`` / ``overlap_param_gather``), ZeRO-3 gathers hide under the
    layers' own compute (one gather per micro-batch is exposed, prefetch hides the rest);
    a micro-batch's reduce-scatters run on their own stream and only the last backward
    waits for them (torch FSDP2: _fsdp_param_group.py L92 reduce_scatter_stream;
    _fully_shard.py L403-411 set_is_last_backward; a unit waits for its previous
    reduction only before launching its next, L679/L784-787): they hide under every later
    forward and backward and every idle slot, from the first rank's first backward to the
    step's end (in 1F1B: m t_b + (m - 1) t_f), the last layer's call of the last
    micro-batch exposed; the step-end reduction hides under the last backward
    (--overlap-grad-reduce), the parameter gather under the first forward
    (--overlap-param-gather). Not overlapped, each runs alone."""
    hide_g = cal.dp_overlap_hidden * np.asarray(cfg.overlap_grad_reduce, dtype=float)
    hide_p = cal.dp_overlap_hidden * np.asarray(cfg.overlap_param_gather, dtype=float)
    fwd_s, bwd_s, rs_s, rs_last_s = st.dp_layer_s
    first_gather = np.minimum(m * st.dp_gather_s, fwd_s)  # prefetch cannot hide the first
    t_up = t_b - t_w if cfg.schedule in SPLIT_BACKWARD else t_b
    rs_window = pipeline - first_backward_s(cfg.schedule, cfg.pp, m, cfg.vp, t_f, t_up)
    out = {"dp_gather_fwd": (np.maximum(0.0, fwd_s - first_gather - m * t_f * hide_p)
                             + first_gather, fwd_s),
           "dp_gather_bwd": (np.maximum(0.0, bwd_s - m * t_b * hide_p), bwd_s),
           "dp_reduce": (np.where(rs_s > 0, np.maximum(rs_last_s, rs_s - rs_window * hide_g),
                                  0.0), rs_s),
           "dp_grads": (np.maximum(0.0, st.dp_grad_s - t_b * hide_g), st.dp_grad_s),
           "dp_params": (np.maximum(0.0, st.dp_param_s - t_f * hide_p), st.dp_param_s)}
    return out, sum(v[0] for v in out.values())


def layout_links(lay: Layout) -> dict:
    """``Structure.links`` of a rank layout: the link each tp / cp / ep / pp group crosses,
    and the layout itself (numbers or arrays, as the layout's sizes are)."""
    return {axis: lay.link(axis) for axis in ("tp", "cp", "ep", "pp")} | {"layout": lay}


def structure(model: ModelSpec, cfg: ParallelConfig, system: System, pl: Placement,
              optimizer: str = "adam", cal: Calibration = DEFAULT) -> Structure:
    """The Structure of one placement, from its layout, its stages and its ledger."""
    lay = Layout(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep, etp=cfg.etp,
                 hsdp_shard=cfg.hsdp_shard, gpus_per_node=system.gpus_per_node,
                 gpus_per_domain=system.gpus_per_domain)
    mtp = model.mtp_layers * len(model.mtp_kinds)  # the MTP depths' layers (ModelSpec)
    busiest, head, share = pace(model.layers, mtp, cfg.pp, cfg.vp, cfg.schedule,
                                framework_of(cfg).split, cfg.stage_layers)
    hs = pl.heaviest_stage
    dp_rows = [c for c in pl.comms if c.axis == "dp"]
    layer, grads, params, gather = dp_split(dp_rows, cfg, system, model.layers / cfg.pp, lay)
    waits, hides = link_s(pl.host_transfers, system.host_bandwidth())  # CPU offload
    cpu = cpu_step_s(pl.host_step_params, system.cpu_optimizer_params_per_s)
    if optim_offload.fraction(cfg):  # Megatron's hybrid-device optimizer
        waits, cpu = optim_offload.step_s(pl.host_transfers, system.host_bandwidth(), cpu, cfg)
    return Structure(
        links=layout_links(lay),
        max_layers=busiest, head_layers=head, head_share=share,
        dp_layer_s=layer, dp_grad_s=grads, dp_param_s=params, dp_gather_s=gather,
        state_bytes=(hs.params_bytes + hs.grads_bytes + 2 * hs.optim_bytes)
        * (cfg.offload == "none") * (1 - optim_offload.fraction(cfg)),  # the host steps it
        offload_s=waits, offload_hidden_s=hides, cpu_step_s=cpu,
        muon_s=muon_s(model, cfg, system, cal, optimizer,
                      {"tp": lay.link("tp"), "dp": lay.link("dp")}))


def estimate(model: ModelSpec, cfg: ParallelConfig, system: System,
             cal: Calibration = DEFAULT, tp_overlap: bool = False,
             precision: str | None = None, optimizer: str = "adam") -> StepEstimate:
    """Step time, throughput, MFU/HFU, memory and where the time goes."""
    if precision is not None and cfg.precision is None:  # the GEMMs' rate reads it there
        cfg = replace(cfg, precision=precision)
    system = nccl_system(system, getattr(cfg, "nccl_nvls", None))
    pl = place(model, cfg, precision=precision, optimizer=optimizer,
               gpus_per_node=system.gpus_per_node, gpus_per_domain=system.gpus_per_domain,
               gpu=system.gpu, nvls=system.nvls)
    st = structure(model, cfg, system, pl, optimizer, cal)
    times = step_times(model, cfg, system, st, cal, tp_overlap)
    exposed = exposures(model, cfg, times.pop("exposed"))
    t = {k: float(v) for k, v in times.items()}
    step = t.pop("step_time_s")
    global_tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
    world, peak = cfg.world, system.gpu.bf16_flops
    model_flops = finetune_flops_per_token(model, cfg.finetune) * global_tokens
    hw_flops = model_flops + recompute_flops_per_token(
        model, cfg.recompute, share=op_share(model, cfg),
        every=1 / recomputed_share(model, cfg, whole=True), modules=cfg.recompute_modules) \
        * global_tokens
    hbm = system.gpu.hbm_bytes
    room = Capacity(system.gpu.name, hbm, hbm * cal.memory_reserve, system.host_memory_bytes)
    capacity = room.usable_bytes
    # what the device must hold, as report judges it: the caching allocator's cached
    # blocks handed back (MemoryBreakdown.required_bytes), at the worst rank
    need = max((m.required_bytes for m in pl.memory_by_rank), default=pl.peak_bytes)
    return StepEstimate(
        step_time_s=step, tokens_per_s_per_gpu=global_tokens / world / step,
        tflops_per_gpu=model_flops / world / step / 1e12,
        hardware_tflops_per_gpu=hw_flops / world / step / 1e12,
        mfu=model_flops / (world * peak * step), hfu=hw_flops / (world * peak * step),
        memory_per_gpu_bytes=float(need), memory_capacity_bytes=capacity,
        fits=bool(need <= capacity) and room.host_fits(pl.host_bytes_per_node),
        breakdown={k: v for k, v in t.items() if v > 1e-12 or k == "compute"},
        placement=pl, capacity=room, exposed=exposed)


def microbatches_for(global_batch: int, dp: int, micro_batch: int) -> int:
    """num_microbatches = global batch (sequences) / (dp x micro_batch), exactly."""
    if global_batch % (dp * micro_batch):
        raise LedgerError("global_batch", f"global_batch({global_batch}) is not divisible by "
                                          f"dp({dp}) * micro_batch({micro_batch})")
    return global_batch // (dp * micro_batch)
