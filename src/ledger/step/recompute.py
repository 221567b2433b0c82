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
  qkv_up_proj_and_rope_apply). DeepSeek-V4's attention (Megatron-LM's dev branch, the
  commit Megatron-Bridge 0.6.0 pins for it in ``.dev.commit``, 43e45e13:
  experimental_attention_variant/deepseek_v4_hybrid_attention.py L691-878) checkpoints
  the same function over its own projections: linear_q_up_proj (q_b, r_q -> heads x d),
  the per-head q norm, linear_kv_proj (its one K=V head, h -> d, from the block's input),
  kv_layernorm and RoPE (``CSA_UP``).
- ``layernorm``: the input and pre-MLP norms that are modules of their own
  (transformer_layer.py L475-530; the others are fused into TE's LayerNormLinear).
- ``moe_act``: the routed experts' activation only (moe/experts.py L1019-1030:
  CheckpointWithoutOutput of bias_act_func between fc1 and fc2).
- ``mlp``: the dense MLP whole, its fused norm and TP collectives included
  (transformer_layer.py L537-539, L992-1010: tensor_parallel.checkpoint of the MLP).
- ``moe``: the MoE layer whole - shared experts, router, permutation, the dispatcher's
  all-to-alls, the routed experts, the combine (moe/moe_layer.py L655-720).
- ``shared_experts``: the shared experts (moe/moe_layer.py L517-530).
- ``gdn_norm_out``: Gated DeltaNet's gated output norm and its HP-to-CP all-to-all
  (ssm/gated_delta_net/gdn.py L266-287): elementwise, no GEMMs (the all-to-all under CP is
  not priced again).

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
from ledger.finetune import modules as matrices
from ledger.model import ModelSpec
from ledger.placement import activation_bytes_per_layer
from ledger.step.eager import dispatch_pass_bytes, expert_pass_bytes
from ledger.step.gemm import bf16_averaged, gemm_s, kind_gemms_s

MOE_PARTS = ("experts", "shared_experts", "router", "latent_proj")  # what ``moe`` re-runs
# MLA's up projections (finetune.modules' names): Megatron's linear_q_up_proj (linear_q_proj
# where q_lora_rank is None) and linear_kv_up_proj (multi_latent_attention.py L862-875)
MLA_UP = ("q_b_proj", "q_proj", "kv_b_proj")
# DeepSeek-V4's (finetune.modules' names for the attention's own q_b and kv_proj - the first
# of each name in a layer's list; a compressor's and the indexer's come after them)
CSA_UP = ("q_b_proj", "kv_proj")


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
            for lin in rerun_linears(model, kind, mods):  # MLA's up projections (q_proj
                if lin.kind == "attention":  # where q_lora_rank is None: qkv's peak;
                    # DeepSeek-V4's kv_proj, whole on every rank, the down projections')
                    peak = pk["qkv"] if lin.name == "q_proj" else pk["mla_up"] \
                        if lin.split == "col" else pk["mla_down"]
                    split = cfg.tp if lin.split == "col" else 1
                    t = t + gemm_s(tokens, lin.out_features / split, lin.in_features, gpu,
                                   cal, peak=peak)
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


def written_dtype(cfg):
    """The config without its low-precision recipe (``precision`` None: the framework's
    saved-tensor table without ``+fp8-<recipe>``), for the step's elementwise term: the
    kernels that make a linear layer's input write it in the activation dtype, and the
    FP8 / FP4 copy Transformer Engine keeps for the backward is cast from it (its own pass
    not priced), as ``layer_time`` already counts FP8 attention's q, k, v. A ParallelConfig
    or the planner's namespace."""
    if is_dataclass(cfg):
        return replace(cfg, precision=None)
    out = copy.copy(cfg)
    out.precision = None
    return out


def rerun_bytes(model: ModelSpec, cfg, mods) -> float:
    """The bytes the recomputed modules other than ``core_attn`` write again in one layer's
    forward, as the step's elementwise term counts them: what the memory model keeps of a
    layer without recompute less what it keeps with them recomputed, at the activation
    dtype (``written_dtype``)."""
    others = tuple(m for m in mods if m != "core_attn")
    if not others:
        return 0.0

    def saved(c, recompute):
        return activation_bytes_per_layer(model, c, recompute=recompute, dropout=0.0,
                                          offload=False)
    c = _with_modules(written_dtype(cfg), others)
    return saved(c, "none") - saved(c, "selective")


def eager_rerun_s(model: ModelSpec, cfg, tokens, gpu, mods) -> float:
    """Forward seconds of the experts' eager passes the recomputed modules run again: all
    of them and the dispatcher's permutation kernels (``dispatch_pass_bytes``: the whole
    layer's forward, permutation included, is what ``moe`` checkpoints) under ``moe``, the
    GLU clamp's alone under ``moe_act`` (the fc2 bias left out)."""
    if "moe" in mods:
        return (expert_pass_bytes(model, cfg, tokens, gpu)[0]
                + dispatch_pass_bytes(model, cfg, tokens)[0]) / gpu.hbm_bytes_per_s
    if "moe_act" in mods and model.mlp_bias:
        model = replace(model, mlp_bias=False)
    return ("moe_act" in mods) * expert_pass_bytes(model, cfg, tokens, gpu)[0] \
        / gpu.hbm_bytes_per_s


def layer_share(model: ModelSpec, mlp: str) -> float:
    """The share of the stack's layers whose MLP block is ``mlp`` (dense | moe)."""
    return model.mlp_share(mlp)


def rerun_linears(model: ModelSpec, kind, mods) -> list:
    """The weight matrices of one layer of ``kind`` whose forward the recomputed ``mods``
    run again, from the one list of a layer's matrices (``ledger.finetune.modules.layer``):
    ``mla_up_proj`` the q and kv up projections of MLA (``MLA_UP``) or DeepSeek-V4's q_b and
    kv_proj (``CSA_UP``), ``mlp`` a dense MLP's,
    ``moe`` every matrix of the MoE block (``MOE_PARTS``: router, routed and shared experts
    with their gate, LatentMoE's projections), ``shared_experts`` the shared experts'."""
    parts = set()
    if "mlp" in mods and kind.mlp == "dense":
        parts.add("mlp")
    if kind.mlp == "moe":
        parts |= set(MOE_PARTS) if "moe" in mods else \
            {"shared_experts"} if "shared_experts" in mods else set()
    attention = model.attention_of(kind).attention if kind.attention else None
    up = "mla_up_proj" in mods and {"mla": MLA_UP, "csa": CSA_UP}.get(attention, ())
    out, seen = [], set()
    for lin in matrices.layer(model, kind):
        if lin.kind in parts:
            out.append(lin)
        elif up and lin.kind == "attention" and lin.name in up and not (
                attention == "csa" and lin.name in seen):  # V4: the attention's own, first
            out.append(lin)
            seen.add(lin.name)
    return out


def rerun_flops_per_token(model: ModelSpec, mods, causal: bool = True) -> float:
    """Model FLOPs per token a selective recompute of ``mods`` adds (the forward of the
    modules' GEMMs over the stack; norms and activations have none): ``core_attn`` the
    attention core's forward (QK^T at the q/k width and PV at the v width over the keys
    each layer sees - a window's, the causal half - ``arch.attention_flops_per_token`` /
    3), the others 2 x the weights a token multiplies in ``rerun_linears`` (a routed
    expert's top_k times)."""
    total = attention_flops_per_token(model, causal) / 3 if "core_attn" in mods else 0.0
    for kind, n in model.kind_counts.items():
        total += n * 2 * sum(lin.in_features * lin.out_features
                             * (model.top_k if lin.experts > 1 else 1)
                             for lin in rerun_linears(model, kind, mods))
    return float(total)
