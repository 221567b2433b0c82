"""FP8 attention as Megatron-Core hands it to Transformer Engine (``fp8_dot_product_
attention``, TE's ``fp8_dpa``): which recipes run it and what its fused kernel keeps for the
backward.

Megatron passes fp8_dpa on under TE's delayed, current-scaling (``tensorwise``) and MXFP8
recipes (megatron/core/fp8_utils.py L777-788 @d98e8a64: Float8CurrentScaling,
MXFP8BlockScaling; extensions/transformer_engine.py L3349-3351: TEDelayedScaling;
Float8BlockScaling takes none). TE's FusedAttnFunc (attention/dot_product_attention/
backends.py @d0067d0d) then quantizes q, k and v (combine_and_quantize, utils.py
L3014-3118; the QKV quantizer row-wise only, get_attention_quantizers L2692-2694: one copy,
MXFP8 with an E8M0 scale per 32) and keeps them in FP8 for its FP8 backward (NVTE_FP8_DPA_BWD
on by default, backends.py L1445; L1579-1587); the output is kept in BF16 under MXFP8 and
under current scaling (NVTE_DPA_FP8CS_O_in_F16 on by default, L210), in FP8 only under
delayed scaling (whose FP8 output is not priced apart: kept here as the others'). What the
fused kernel saves in BF16 otherwise: ``ledger.arch.activations``.
"""
from __future__ import annotations

from ledger.formats import bytes_per_element
from ledger.frameworks.conventions import of as framework_of

FP8_ATTENTION_RECIPES = ("delayed", "tensorwise", "mxfp8")
# bytes per element of the saved q, k, v: E4M3 (a per-tensor scale), MXFP8 one row-wise copy
QKV_BYTES = {"delayed": 1.0, "tensorwise": 1.0, "mxfp8": bytes_per_element("mxfp8")}


def fp8_attention(cfg) -> bool:
    """Whether the attention core runs in FP8: ``cfg.fp8_attention`` under Megatron with an
    FP8 recipe that passes it on to TE (``FP8_ATTENTION_RECIPES``)."""
    if not getattr(cfg, "fp8_attention", False):
        return False
    fw = framework_of(cfg)
    rec = getattr(fw, "fp8", None)
    return bool(fw.name == "megatron" and rec is not None and rec.gemm_format == "fp8"
                and rec.name in FP8_ATTENTION_RECIPES)


def saved_qkv_bytes(cfg) -> float:
    """Bytes per element of the q, k, v the fused attention kernel keeps: its FP8 copies'
    under FP8 attention, else 0 (the activation dtype's, ``ledger.arch.activations``)."""
    return QKV_BYTES[framework_of(cfg).fp8.name] if fp8_attention(cfg) else 0.0
