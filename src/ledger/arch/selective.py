"""Megatron-Core's selective recompute by module (``--recompute-modules``): which modules a
selective recompute runs again, and what each drops from one layer's saved bytes
(``ledger.arch.activations`` prices the rest: ``moe_act`` where the experts' tensors are
priced, ``mla_up_proj`` where MLA's are, ``gdn_norm_out`` where Gated DeltaNet's are). The
choices are ``ledger.frameworks.recompute_modules`` (megatron/core/transformer/
transformer_config.py L560-583 @d98e8a64; L1940-1941: the default ["core_attn"])."""
from __future__ import annotations

from ledger.arch.saved_tensors import mla_down_copies
from ledger.frameworks import gemm_input_bytes as _gi


def selected(recompute: str, modules) -> tuple[str, ...]:
    """The modules a selective recompute runs again (Megatron's default: core_attn)."""
    if recompute != "selective":
        return ()
    return ("core_attn",) if modules is None else tuple(modules)


def recomputed_modules(model, t, e, tokens, sp_div, moe, mods, norm_a, norm_m, mlp,
                        router, experts, shared, moe_norm: bool = True):
    """What Megatron's selective modules drop from one layer's saved bytes
    (megatron/core/transformer/transformer_layer.py, moe/moe_layer.py, mlp.py):
    ``layernorm`` discards the output of the norms that are modules of their own (MLA's
    input norm and an MoE layer's pre-MLP norm: gpt_layer_specs.py L244-336; the other
    norms are fused into TE's LayerNormLinear and are IdentityOp), ``mlp`` checkpoints
    the dense MLP with its fused norm, keeping its h-wide input, ``moe`` the MoE layer
    and ``shared_experts`` the shared experts, keeping nothing beyond the pre-MLP norm's
    output the router reads (``moe_act`` and ``mla_up_proj`` are applied where those
    tensors are priced). ``moe_norm``: whether ``layernorm`` reaches the MoE layer's
    pre-MLP norm (``ledger.frameworks.recompute_modules.pre_mlp_norm_recomputed``)."""
    h = model.hidden
    gemm_in = h * _gi(t, e) * tokens / (sp_div if t.sp_gemm_input_shard else 1)
    if "layernorm" in mods:  # MLA's down-projections' copies of it (activations.mla_down_copies)
        mla = getattr(model, "attention", "mha") == "mla"
        copies = mla_down_copies(t) if mla and getattr(model, "q_lora_rank", None) else 1
        norm_a = norm_a - gemm_in * mla * copies
        norm_m = norm_m - gemm_in * bool(moe and moe_norm)
    if "mlp" in mods and not moe:
        norm_m, mlp = h * e * tokens / sp_div + 0.0 * norm_m, 0.0 * mlp
    if "moe" in mods and moe:
        router, experts, shared = 0.0 * router, 0.0 * experts, 0.0 * shared
    if "shared_experts" in mods and moe:
        shared = 0.0 * shared
    return norm_a, norm_m, mlp, router, experts, shared
