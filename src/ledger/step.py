"""From bytes to seconds: FLOPs, step time, MFU and HFU of one placement on one system.

Model FLOPs per token (PaLM, Chowdhery et al. 2022, app. B, with the causal mask):

    6 * N_matmul          (6 = 2 multiply-add x (1 forward + 2 backward))
  + 6 * l * s * q_dim     (QK^T and AV, forward and backward, over the s/2 keys a causal
                           token sees on average; PaLM and Narayanan et al. 2021 eq. 3
                           count all s keys, 12 l s q_dim - Llama 3's reported 380 TFLOP/s
                           at 128K tokens adds up only with the causal count)

where N_matmul are the weights tokens multiply (attention, MLP, the top-k experts a token
visits, router, output layer; not the embedding lookup or norms). Hardware FLOPs add what
recompute repeats: full recompute (+1 forward of every layer), selective (+1 forward of
the attention core). MFU counts model FLOPs, HFU hardware FLOPs.

The time of one micro-batch on one pipeline stage is the sum, per layer, of
  GEMMs      hardware FLOPs / (peak x GEMM efficiency x w/(w + w_half)), w = hidden/tp
  attention  scores FLOPs at the same efficiency; causal flash kernels skip the masked half
  elementwise  memory traffic: ``elementwise_traffic`` x the layer's activation bytes / HBM
  TP         its collectives over the TP link (alpha-beta), exposed unless overlapped
  CP         ring K/V blocks, hidden under the attention they feed; Ulysses exposed
  EP         dispatch + combine all-to-alls, exposed
The pipeline multiplies micro-batch times by its schedule (closed forms the simulator
verifies); data parallelism hides under the last backward; the optimizer reads and writes
its state once.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ledger.collectives import ring_bytes as coll_bytes
from ledger.comms import ring_kv_block_bytes
from ledger.errors import LedgerError
from ledger.flops import matmul_params_per_token, model_flops_per_token  # noqa: F401
from ledger.footprint import Capacity
from ledger.layout import Layout
from ledger.memory import activation_bytes_per_layer as _act
from ledger.model import ModelSpec
from ledger.parallel import ParallelConfig, Placement, place
from ledger.stages import rank_layers
from ledger.system import System


@dataclass(frozen=True)
class Calibration:
    """The time model's constants; each is a physical quantity. The first two were fitted
    once, by a grid search minimising the mean error on the eight Korthikanti et al. 2022
    A100 rows (benchmarks/validation.py --fit); the rest are set, not fitted. Never per row."""

    gemm_half_width: float = 256.0  # per-GPU hidden width at which GEMMs reach half their peak
    elementwise_traffic: float = 2.0  # HBM bytes moved by non-GEMM kernels / activation bytes
    tp_overlap_hidden: float = 0.7  # share of TP communication hidden by --tp-overlap
    dp_overlap_hidden: float = 0.9  # share of the last backward that DP traffic can hide under
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


def recompute_flops_per_token(model: ModelSpec, recompute: str, causal: bool = True) -> float:
    """What recompute adds: one more forward of every layer (full) or of the attention
    core only (selective, Korthikanti et al. 2022 sec. 5)."""
    q_dim = model.heads * model.head_dim
    attn_fwd = (2 if causal else 4) * model.layers * model.seq_len * q_dim
    if recompute == "full":
        layer_params = matmul_params_per_token(model) - model.vocab * model.hidden
        return 2 * layer_params + attn_fwd
    return attn_fwd if recompute == "selective" else 0.0


@dataclass(frozen=True)
class _Layer:
    """Seconds one layer takes for one micro-batch on one GPU, forward, by cause."""

    gemm: float
    attention: float
    elementwise: float
    core_elementwise: float  # the attention core's share (softmax, dropout): selective redoes it
    tp: float
    cp: float
    ep: float

    def forward(self) -> dict[str, float]:
        return {"compute": self.gemm + self.attention, "elementwise": self.elementwise,
                "tp_comm": self.tp, "cp_comm": self.cp, "ep_comm": self.ep}

    def backward(self, recompute: str) -> dict[str, float]:
        """Twice the forward's math; TP's conjugate collectives once; plus recompute."""
        out = {"compute": 2 * (self.gemm + self.attention), "elementwise": 2 * self.elementwise,
               "tp_comm": self.tp, "cp_comm": 2 * self.cp, "ep_comm": self.ep}
        if recompute == "full":  # the forward again, its TP collectives included
            for k, v in self.forward().items():
                out[k] = out[k] + v  # not +=: with arrays that would write into self
        elif recompute == "selective":  # the attention core only
            out["compute"] = out["compute"] + self.attention
            out["elementwise"] = out["elementwise"] + self.core_elementwise
        return out


def _collective_s(kind: str, n, payload, link, system: System):
    """alpha-beta: (n-1) latency hops (2(n-1) for all-reduce) + ring bytes / bandwidth;
    numbers or arrays (a group of one costs nothing)."""
    hops = (2 if kind == "all_reduce" else 1) * (n - 1)
    return hops * system.latency(link) + coll_bytes(kind, n, payload) / system.bandwidth(link)


def _layer_times(model: ModelSpec, cfg, system: System, links: dict,
                 cal: Calibration) -> _Layer:
    """One layer, one micro-batch, one GPU, forward. ``cfg`` may hold numpy arrays for its
    sizes (the planner's grid); its categorical fields are plain values."""
    gpu = system.gpu
    tokens = model.seq_len * cfg.micro_batch / cfg.cp  # this GPU's tokens per micro-batch
    width = model.hidden / cfg.tp
    eff = gpu.gemm_efficiency * width / (width + cal.gemm_half_width)
    rate = gpu.bf16_flops * eff
    per_layer_params = (matmul_params_per_token(model) - model.vocab * model.hidden) / model.layers
    gemm = 2 * tokens * per_layer_params / cfg.tp / rate
    q_dim = model.heads * model.head_dim
    causal_skip = 0.5 if cfg.flash_attention else 1.0  # flash skips the masked half
    attention = 4 * tokens * model.seq_len * q_dim * causal_skip / cfg.tp / rate

    def act(flash: bool):
        return _act(seq_len=model.seq_len, micro_batch=cfg.micro_batch, hidden=model.hidden,
                    heads=model.heads, tp=cfg.tp, cp=cfg.cp,
                    sequence_parallel=cfg.sequence_parallel, flash=flash)
    traffic = cal.elementwise_traffic / gpu.hbm_bytes_per_s
    elementwise = traffic * act(cfg.flash_attention)
    core = traffic * (act(cfg.flash_attention) - act(True))
    s_act = tokens * model.hidden * cfg.act_bytes
    tp = 2 * _collective_s("all_reduce", cfg.tp, s_act, links["tp"], system)
    if cfg.cp_kind == "ring":
        block = ring_kv_block_bytes(tokens, model.kv_dim, cfg.tp, cfg.act_bytes)
        send = (cfg.cp - 1) * (system.latency(links["cp"]) + block / system.bandwidth(links["cp"]))
        cp = np.maximum(0.0, send - attention)  # each block hides under the last one's math
    else:
        qkvo = tokens * (2 * q_dim + 2 * model.kv_dim) / cfg.tp * cfg.act_bytes
        cp = _collective_s("all_to_all", cfg.cp, qkvo, links["cp"], system)
    topk = model.top_k if model.is_moe else cfg.moe.topk
    routed = tokens * model.hidden * cfg.act_bytes * topk * cfg.moe.capacity_factor
    moe_share = model.moe_layers / model.layers if model.is_moe else 1.0
    ep = 2 * _collective_s("all_to_all", cfg.ep, routed, links["ep"], system) * moe_share
    return _Layer(gemm, attention, elementwise, core, tp, cp, ep)


def pipeline_s(schedule: str, p, m, v, t_f, t_b, p2p):
    """Makespan of a schedule: the closed forms tests/test_schedules.py holds the
    simulator to (for zb-v: m >= 2p - 1; interleaved-zb has none and is simulated)."""
    fill = 2 * (p - 1) * p2p  # one hop per boundary on the way down and back up
    if schedule == "zb-h1":
        # Qi et al. sec. 2.1 with T_B = T_W = t_b/2: (p-1) max(T_F + T_B - T_W, T_F, T_B)
        return m * (t_f + t_b) + (p - 1) * np.maximum(t_f, t_b / 2) + fill
    if schedule == "zb-v":
        return m * (t_f + t_b) + (p - 1) * t_f / 2 + fill
    if schedule == "interleaved-zb":
        from ledger.pipeline import Costs, simulate
        from ledger.schedules import build

        return simulate(build(schedule, p, m, v), Costs(t_f, t_b, p2p_s=p2p)).makespan + 0.0
    bubble = (p - 1) / (v if schedule == "interleaved" else 1)
    return (m + bubble) * (t_f + t_b) + fill


@dataclass(frozen=True)
class Structure:
    """What the time model needs from the layout, per placement (numbers or arrays)."""

    links: dict  # axis -> "nvlink" | "ib" (or arrays of them) for tp, cp, ep, pp
    max_layers: object  # most layers on any pipeline rank
    last_layers: object  # layers on the last rank, which also runs the output layer
    dp_seconds: object  # DP traffic per step over its links, before any overlap
    state_bytes: object  # resident state of the heaviest stage (for the optimizer step)


def step_times(model: ModelSpec, cfg, system: System, st: Structure, cal: Calibration,
               tp_overlap: bool) -> dict:
    """Step time and its causes for one placement or a grid of them."""
    lt = _layer_times(model, cfg, system, st.links, cal)
    if tp_overlap:
        lt = replace(lt, tp=lt.tp * (1 - cal.tp_overlap_hidden))
    fwd, bwd = lt.forward(), lt.backward(cfg.recompute)
    f_layer, per_layer = sum(fwd.values()), sum(fwd.values()) + sum(bwd.values())
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    out_layer = 3 * 2 * tokens * model.vocab * model.hidden / cfg.tp / (
        system.gpu.bf16_flops * system.gpu.gemm_efficiency)  # logits, on the last stage
    last = st.last_layers * per_layer + out_layer
    last_critical = last >= st.max_layers * per_layer  # the busiest rank sets the pace
    layers = np.where(last_critical, st.last_layers, st.max_layers)
    stage = layers * per_layer + last_critical * out_layer
    t_f = layers * f_layer + last_critical * out_layer / 3
    t_b = stage - t_f
    s_pp = tokens * model.hidden * cfg.act_bytes / (cfg.tp if cfg.sequence_parallel else 1)
    pp_link = st.links["pp"]
    p2p = (cfg.pp > 1) * (system.latency(pp_link) + s_pp / system.bandwidth(pp_link))
    m = cfg.num_microbatches
    pipeline = pipeline_s(cfg.schedule, cfg.pp, m, cfg.vp, t_f, t_b, p2p)
    window = (t_b + (t_f if cfg.zero_stage == 3 else 0.0)) * cal.dp_overlap_hidden
    dp_exposed = np.maximum(0.0, st.dp_seconds - window)  # reduced under the last backward
    optim = st.state_bytes / system.gpu.hbm_bytes_per_s  # read all of it, write it back
    out = {k: (fwd[k] + bwd[k]) * layers * m for k in fwd}
    out["compute"] = out["compute"] + last_critical * out_layer * m
    out |= {"pp_bubble": pipeline - m * (t_f + t_b), "dp_comm": dp_exposed,
            "optimizer": optim}
    out["step_time_s"] = pipeline + dp_exposed + optim
    return out


def estimate(model: ModelSpec, cfg: ParallelConfig, system: System,
             cal: Calibration = DEFAULT, tp_overlap: bool = False,
             precision: str | None = None, optimizer: str = "adam") -> StepEstimate:
    """Step time, throughput, MFU/HFU, memory and where the time goes."""
    pl = place(model, cfg, precision=precision, optimizer=optimizer,
               gpus_per_node=system.gpus_per_node)
    lay = Layout(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep,
                 hsdp_shard=cfg.hsdp_shard, gpus_per_node=system.gpus_per_node)
    layers = rank_layers(model.layers, cfg.pp, cfg.vp, cfg.schedule == "zb-v")
    hs = pl.heaviest_stage
    st = Structure(
        links={axis: lay.link(axis) for axis in ("tp", "cp", "ep", "pp")},
        max_layers=max(layers), last_layers=layers[0 if cfg.schedule == "zb-v" else -1],
        dp_seconds=sum(c.bytes / system.bandwidth(c.link) for c in pl.comms if c.axis == "dp"),
        state_bytes=hs.params_bytes + hs.grads_bytes + 2 * hs.optim_bytes)
    t = {k: float(v) for k, v in step_times(model, cfg, system, st, cal, tp_overlap).items()}
    step = t.pop("step_time_s")
    global_tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
    world, peak = cfg.world, system.gpu.bf16_flops
    model_flops = model_flops_per_token(model) * global_tokens
    hw_flops = model_flops + recompute_flops_per_token(model, cfg.recompute) * global_tokens
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
