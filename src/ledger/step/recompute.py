"""What a selective recompute by module runs again in one layer's backward: the forward of
exactly the modules ``ledger.arch.selective.selected`` names (Megatron-Core's
``--recompute-modules``; its default ``core_attn``), the same list the memory model drops
from a layer's saved bytes. Each module re-runs what its checkpoint wraps (Megatron-LM
@d98e8a64, megatron/core/transformer/):

- ``core_attn``: the attention core (attention.py L393-394, L495: tensor_parallel.checkpoint
  of core_attention) - the step's attention time and, without flash, its score passes.
- ``mla_up_proj``: the q and kv up-projections (linear_q_up_proj, or linear_q_proj where
  q_lora_rank is None, and linear_kv_up_proj) and RoPE's application
  (multi_latent_attention.py L862-875, L983-988: CheckpointWithoutOutput of
  qkv_up_proj_and_rope_apply).
- ``layernorm``: the input and pre-MLP norms that are modules of their own
  (transformer_layer.py L475-530; the others are fused into TE's LayerNormLinear).
- ``moe_act``: the routed experts' activation only (moe/experts.py L1019-1030:
  CheckpointWithoutOutput of bias_act_func between fc1 and fc2).
- ``mlp``: the dense MLP whole, its fused norm and TP collectives included
  (transformer_layer.py L537-539, L992-1010: tensor_parallel.checkpoint of the MLP).
- ``moe``: the MoE layer whole - shared experts, router, permutation, the dispatcher's
  all-to-alls, the routed experts, the combine (moe/moe_layer.py L655-720).
- ``shared_experts``: the shared experts (moe/moe_layer.py L517-530).

GEMMs run at the precision ``ledger.step.gemm`` gives them in the forward; the modules'
elementwise passes are priced as the step prices a layer's (``Calibration.elementwise_traffic``
x the bytes it saves): the bytes the memory model no longer keeps once those modules are
recomputed. The routed experts' eager passes (``ledger.step.eager``) run again, their forward
passes at the HBM rate: all of them under ``moe``, the clamped GLU's under ``moe_act`` (the clamp
is inside the checkpointed bias_act_func, moe/experts.py L680-743 @55ac7082; the fc2 bias's
_apply_bias runs after it).
"""
from __future__ import annotations

import copy
from dataclasses import is_dataclass, replace

from ledger.arch import attention_flops_per_token, selected
from ledger.model import ModelSpec
from ledger.placement import activation_bytes_per_layer
from ledger.step.eager import expert_pass_bytes
from ledger.step.gemm import bf16_averaged, gemm_s, kind_gemms_s

MOE_PARTS = ("experts", "shared_experts", "router", "latent_proj")  # what ``moe`` re-runs


def modules(cfg) -> tuple[str, ...]:
    """The modules a config's selective recompute runs again (``ledger.arch.selected``:
    the list the memory model prices; () unless selective)."""
    return selected(cfg.recompute, getattr(cfg, "recompute_modules", None))


def rerun_gemms_s(model: ModelSpec, cfg, tokens, gpu, cal, mods) -> float:
    """Forward GEMM seconds of the recomputed modules of one layer, averaged over the stack
    (each kind of layer by its count; a recipe's BF16 layers at the BF16 peak, as
    ``ledger.step.gemm.layer_gemms_s`` averages them)."""
    if not {"mla_up_proj", "mlp", "moe", "shared_experts"} & set(mods):
        return 0.0  # core_attn, layernorm, moe_act: no GEMMs

    def stack(pk):
        total = 0.0
        for kind, n in model.kind_counts.items():
            parts = kind_gemms_s(model, kind, cfg, tokens, gpu, cal, pk)
            t = 0.0
            if "mlp" in mods and kind.mlp == "dense":
                t = t + parts["mlp"]
            if "moe" in mods and kind.mlp == "moe":
                t = t + sum(parts.get(p, 0.0) for p in MOE_PARTS)
            elif "shared_experts" in mods and kind.mlp == "moe":
                t = t + parts.get("shared_experts", 0.0)
            view = model.attention_of(kind)
            if "mla_up_proj" in mods and "attention" in kind.mixer and view.attention == "mla":
                q_peak = pk["mla_up"] if view.q_lora_rank else pk["qkv"]
                q_in = view.q_lora_rank or view.hidden
                kv = view.heads * (view.qk_nope_head_dim + view.v_head_dim)
                up = pk["mla_up"]
                t = t + gemm_s(tokens, view.q_dim / cfg.tp, q_in, gpu, cal, peak=q_peak) \
                    + gemm_s(tokens, kv / cfg.tp, view.kv_lora_rank, gpu, cal, peak=up)
            total = total + n * t
        return total / model.layers
    return bf16_averaged(model, cfg, gpu, stack)


def _with_modules(cfg, mods):
    """The config with ``recompute_modules`` set (a ParallelConfig or the planner's namespace)."""
    if is_dataclass(cfg):
        return replace(cfg, recompute_modules=mods)
    out = copy.copy(cfg)
    out.recompute_modules = mods
    return out


def rerun_bytes(model: ModelSpec, cfg, mods) -> float:
    """The bytes the recomputed modules other than ``core_attn`` write again in one layer's
    forward, as the step's elementwise term counts them: what the memory model keeps of a
    layer without recompute less what it keeps with them recomputed."""
    others = tuple(m for m in mods if m != "core_attn")
    if not others:
        return 0.0

    def saved(c, recompute):
        return activation_bytes_per_layer(model, c, recompute=recompute, dropout=0.0,
                                          offload=False)
    c = _with_modules(cfg, others)
    return saved(c, "none") - saved(c, "selective")


def eager_rerun_s(model: ModelSpec, cfg, tokens, gpu, mods) -> float:
    """Forward seconds of the experts' eager passes the recomputed modules run again: all
    of them under ``moe``, the GLU clamp's alone under ``moe_act`` (the fc2 bias left out)."""
    if "moe" in mods:
        return expert_pass_bytes(model, cfg, tokens)[0] / gpu.hbm_bytes_per_s
    if "moe_act" in mods and model.mlp_bias:
        model = replace(model, mlp_bias=False)
    return ("moe_act" in mods) * expert_pass_bytes(model, cfg, tokens)[0] / gpu.hbm_bytes_per_s


def layer_share(model: ModelSpec, mlp: str) -> float:
    """The share of the stack's layers whose MLP block is ``mlp`` (dense | moe)."""
    return sum(n for k, n in model.kind_counts.items() if k.mlp == mlp) / model.layers


def rerun_flops_per_token(model: ModelSpec, mods, causal: bool = True) -> float:
    """Model FLOPs per token a selective recompute of ``mods`` adds (the forward of the
    modules' GEMMs over the stack; norms and activations have none): ``core_attn`` the
    attention core's forward (QK^T at the q/k width and PV at the v width over the keys
    each layer sees - a window's, the causal half - ``arch.attention_flops_per_token`` /
    3), ``mla_up_proj`` 2 x the q and kv up projections' weights per MLA layer, ``mlp``
    2 x the dense MLP's, ``moe`` 2 x the router's, top_k routed experts', the shared
    experts' and LatentMoE's projections per MoE layer, ``shared_experts`` 2 x the shared
    experts'."""
    total = 0.0
    if "core_attn" in mods:  # the forward third of the core's FLOPs over the keys each
        total += attention_flops_per_token(model, causal) / 3  # layer sees (PV at v width)
    ups = 3 if model.gated_mlp else 2  # up (and gate) and down
    for kind, n in model.kind_counts.items():
        view = model.attention_of(kind)
        if "mla_up_proj" in mods and "attention" in kind.mixer and view.attention == "mla":
            q_in = view.q_lora_rank or view.hidden
            total += n * 2 * (q_in * view.q_dim + view.kv_lora_rank * view.heads
                              * (view.qk_nope_head_dim + view.v_head_dim))
        if "mlp" in mods and kind.mlp == "dense":
            total += n * 2 * ups * model.hidden * model.ffn_hidden
        if kind.mlp != "moe":
            continue
        shared = ups * model.hidden * (model.shared_ffn if model.shared_experts else 0)
        if "moe" in mods:
            lat = 2 * model.hidden * model.moe_latent if model.moe_latent else 0
            total += n * 2 * (model.hidden * model.num_experts + shared + lat + model.top_k
                              * ups * model.expert_hidden * model.moe_ffn_hidden)
        elif "shared_experts" in mods:
            total += n * 2 * shared
    return float(total)
