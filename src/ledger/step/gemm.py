"""GEMM seconds: one GEMM at its own efficiency, and the forward GEMMs of one layer as
the frameworks shape them under TP, ETP and EP (ledger.step sums them into step time).
Under an FP8 recipe each linear layer's GEMMs run at the GPU's FP8 peak where
``ledger.frameworks.fp8.gemm_precision`` says so (the same in fprop, dgrad and wgrad: every pass of
a linear layer), at the same sustained share of that peak (no separate FP8 figure is
published or fitted); the attention core, the router and the output head stay BF16."""
from __future__ import annotations

from ledger.config import expert_tp
from ledger.frameworks import of as framework_of
from ledger.frameworks import peak_flops
from ledger.model import ModelSpec
from ledger.placement import moe_tokens


def gemm_s(m, n, k, gpu, cal, count=1.0, peak=None):
    """Seconds of ``count`` (m x k) @ (k x n) GEMMs: 2mnk FLOPs at the GPU's sustained
    share of peak, lowered by each dimension d as d / (d + d_half) - small tiles fill few
    SMs and reuse little data (NVIDIA, Matrix Multiplication Background guide: tile and
    wave quantisation, arithmetic intensity). A thin dimension turns a GEMM bandwidth-
    bound once its arithmetic intensity (~ d FLOP per byte) falls below the GPU's machine
    balance, so d_half = gemm_half_balance x peak FLOP/s / HBM bytes/s (roofline), in
    BF16 terms: at the FP8 rate (``peak``) both the FLOP/s and the FLOP per byte of an
    element double, so d_half in elements stays."""
    half = cal.gemm_half_balance * gpu.bf16_flops / gpu.hbm_bytes_per_s
    eff = gpu.gemm_efficiency * (m / (m + half)) * (n / (n + half)) * (k / (k + half))
    return count * 2.0 * m * n * k / ((gpu.bf16_flops if peak is None else peak) * eff)


def _peaks(cfg, gpu) -> dict:
    """GEMM name (ledger.frameworks.fp8.GEMMS) -> the peak its FLOPs run at under the config."""
    fw = framework_of(cfg)
    return {g: peak_flops(gpu, fw, g) for g in ("qkv", "attn_out", "mla_down", "mla_up",
                                               "mlp_up", "mlp_down", "experts_up",
                                               "experts_down", "shared_up", "shared_down")}


def _attention_gemms(model: ModelSpec, tokens, tp, gpu, cal, pk):
    """Forward seconds of one layer's attention projections (flops.attention_matmul_params'
    weights). MLA: the down projections whole on every TP rank, the up projections and o
    split (Megatron-Core, megatron/core/models/gpt/gpt_layer_specs.py:105-128 at
    d98e8a64dd); otherwise QKV column- and o row-parallel."""
    h, v_width = model.hidden, model.heads * model.v_head_dim
    o = gemm_s(tokens, h, v_width / tp, gpu, cal, peak=pk["attn_out"])
    if model.attention != "mla":
        return gemm_s(tokens, (model.q_dim + 2 * model.kv_dim) / tp, h, gpu, cal,
                      peak=pk["qkv"]) + o
    r_q, r_kv, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
    down, up = pk["mla_down"], pk["mla_up"]
    kv = gemm_s(tokens, r_kv + rope, h, gpu, cal, peak=down) + gemm_s(
        tokens, model.heads * (model.qk_nope_head_dim + model.v_head_dim) / tp, r_kv, gpu, cal,
        peak=up)
    q = gemm_s(tokens, model.q_dim / tp, h, gpu, cal, peak=pk["qkv"]) if r_q is None else \
        gemm_s(tokens, r_q, h, gpu, cal, peak=down) \
        + gemm_s(tokens, model.q_dim / tp, r_q, gpu, cal, peak=up)
    return q + kv + o


def _mlp_gemms(width, tokens, model: ModelSpec, tp, gpu, cal, pk, kind="mlp"):
    """Forward seconds of one MLP of ``width``: up (and gate) column-, down row-parallel;
    ``kind``: mlp | experts | shared, for its GEMMs' precision."""
    up = (2 if model.gated_mlp else 1) * width / tp
    return gemm_s(tokens, up, model.hidden, gpu, cal, peak=pk[kind + "_up"]) \
        + gemm_s(tokens, model.hidden, width / tp, gpu, cal, peak=pk[kind + "_down"])


def layer_gemms_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward GEMM seconds of one layer, averaged over the stack: attention projections,
    the dense MLP (dense layers' share), the router, the routed experts a GPU holds and
    the shared expert of width ``model.shared_ffn`` (MoE layers' share)."""
    h, tp, pk = model.hidden, cfg.tp, _peaks(cfg, gpu)
    t = _attention_gemms(model, tokens, tp, gpu, cal, pk)
    dense = _mlp_gemms(model.ffn_hidden, tokens, model, tp, gpu, cal, pk)
    if not model.is_moe:
        return t + dense
    share, etp = model.moe_layers / model.layers, expert_tp(cfg)
    # rows each local expert sees: the dispatcher's tokens (comms_ep.moe_tokens: the SP
    # shard under Megatron) x top_k over the EP group's experts, gathered over ETP
    per_expert = moe_tokens(cfg, tokens) * model.top_k * cfg.ep * etp / model.num_experts
    routed = model.num_experts / cfg.ep * _mlp_gemms(model.moe_ffn_hidden, per_expert, model,
                                                     etp, gpu, cal, pk, "experts")
    shared = _mlp_gemms(model.shared_ffn, tokens, model, tp, gpu, cal, pk, "shared") \
        if model.shared_experts else 0.0
    router = gemm_s(tokens, model.num_experts, h, gpu, cal)
    return t + (1 - share) * dense + share * (routed + shared + router)
