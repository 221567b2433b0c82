"""Per-module formats a low-precision recipe's quantization file sets, as data: which
linear layers of a layer run in BF16 or in another block-scaled format than the recipe's.

Megatron-Core reads such a file as ``quant_recipe`` (Transformer Engine
``TEQuantizationParams`` configs matched to module names by glob); a module it matches
keeps that format's weight copies (BF16: none, the BF16 parameter is the GEMM's operand)
and saves its input in that format (BF16: the input itself, 2 B; MXFP8: its column-wise
copy, 1 + 1/32 B). Named files (``QUANT_FILES``) are spelled on the precision string as
``+quant-<name>`` (``ledger.frameworks.fp8.recipe``).

Modules, per layer (``ledger.frameworks.gemm_weights``' GEMMs):
- ``qkv``        the attention's linear_qkv (its input: the pre-norm's output, h wide)
- ``attn_out``   the attention's linear_proj (its input: the attention output, a x v)
- ``latent``     LatentMoE's fc1_latent_proj / fc2_latent_proj (inputs: the MoE block's
                 h-wide input, the combined x-wide rows; weights whole on every TP rank)
- ``mamba_out``  a Mamba mixer's out_proj (input: the gated norm's output, inner wide)
"""
from __future__ import annotations

import re

from ledger.errors import LedgerError
from ledger.formats import bytes_per_element

MX8 = bytes_per_element("mxfp8")
# Nemotron 3 Super's NVFP4 te_quant.cfg (Megatron-Bridge scripts/performance/configs/
# nemotronh/te_quant.cfg @ v0.4.1 f9b6319e, loaded by nemotron_3_llm_pretrain.py's
# model.quant_recipe when precision is nvfp4): attn_qkv_bf16 "*.linear_qkv",
# attn_proj_bf16 "*.linear_proj", latent_bf16 "*mlp.fc[12]_latent_proj" -> bf16;
# mamba_outproj_mxfp8 "*mixer.out_proj" -> mxfp8; mtp_bf16 "mtp.*" -> bf16 (the MTP block:
# ``Fp8Recipe.bf16_mtp``, ``+bf16-mtp``)
QUANT_FILES = {"nemotronh": (("qkv", "bf16"), ("attn_out", "bf16"), ("latent", "bf16"),
                             ("mamba_out", "mxfp8"))}
FORMATS = {"bf16": dict(weight=0.0, saved=2.0), "mxfp8": dict(weight=2 * MX8, saved=MX8)}
QUANT = re.compile(r"\+quant-([a-z0-9_]+)$")  # "+quant-nemotronh": a QUANT_FILES name


def split_quant(precision: str) -> tuple[str, tuple]:
    """(the precision string without its "+quant-<name>" suffix, that file's formats)."""
    found = QUANT.search(precision)
    if not found:
        return precision, ()
    if found.group(1) not in QUANT_FILES:
        raise LedgerError("quant_recipe", f"known quantization files: "
                                          f"{', '.join(QUANT_FILES)}, got {found.group(1)!r}")
    return precision[:found.start()], QUANT_FILES[found.group(1)]


def module_weights(model, kind, tp: int) -> dict[str, float]:
    """GEMM weight elements of each module on one GPU of a layer of ``kind``."""
    out = {}
    if kind.mixer in ("attention", "attention+mamba") and \
            getattr(model, "attention", "mha") != "mla":
        h = model.hidden
        out["qkv"] = (h * model.q_dim + h * model.kv_dim + h * model.kv_heads
                      * model.v_head_dim) / tp
        out["attn_out"] = model.heads * model.v_head_dim * h / tp
    if kind.mixer in ("mamba", "attention+mamba") and getattr(model, "mamba", None) is not None:
        out["mamba_out"] = model.mamba.inner * model.hidden / tp
    x = getattr(model, "expert_hidden", model.hidden)
    if kind.mlp == "moe" and x != model.hidden:
        out["latent"] = 2.0 * model.hidden * x  # whole on every TP rank
    return out


def weight_delta(rec, model, kind, tp: int, copies: float) -> float:
    """Bytes one layer of ``kind`` keeps beyond the recipe's weight copies for the
    modules its file sets apart (negative: fewer); ``copies``: 1, or 0.5 where TE keeps
    one buffer (``ledger.frameworks.fp8.single_buffer``)."""
    formats = dict(rec.module_formats)
    elems = module_weights(model, kind, tp)
    return sum(n * (FORMATS[formats[m]]["weight"] - rec.weight_cache_bytes) * copies
               for m, n in elems.items() if m in formats)


def saved_delta(rec, model, kind, *, tokens, tp: int, sp_div, e: float, flash: bool,
                shard_input: bool = True) -> float:
    """Bytes one layer of ``kind`` saves beyond what the recipe's table prices, for the
    modules its file sets apart: their inputs in the module's format, not the recipe's
    (``rec.act_bytes``); ``tokens``: the micro-batch's s b / cp, ``sp_div``: tp under SP.
    The attention output is flash's own copy beside the projection's: BF16 drops the
    projection's. The MoE block's input stays quantized for its shared expert; BF16
    latent projections keep it whole beside that copy."""
    formats = dict(rec.module_formats)
    gi = rec.act_bytes or e
    out = 0.0
    if kind.mixer in ("attention", "attention+mamba") and \
            getattr(model, "attention", "mha") != "mla":
        if "qkv" in formats:
            out += model.hidden * (FORMATS[formats["qkv"]]["saved"] - gi) * tokens \
                / (sp_div if shard_input else 1)
        if "attn_out" in formats:
            width = model.heads * model.v_head_dim * tokens / tp
            saved = FORMATS[formats["attn_out"]]["saved"]
            out += width * ((0.0 if saved == e else saved) - gi) if flash \
                else width * (saved - gi)
    if "mamba_out" in formats and kind.mixer in ("mamba", "attention+mamba") \
            and getattr(model, "mamba", None) is not None:
        out += model.mamba.inner * (FORMATS[formats["mamba_out"]]["saved"] - gi) * tokens / tp
    x = getattr(model, "expert_hidden", model.hidden)
    if "latent" in formats and kind.mlp == "moe" and x != model.hidden:
        saved = FORMATS[formats["latent"]]["saved"]
        out += model.hidden * saved * tokens / (sp_div if shard_input else 1)  # fc1's input
        out += x * (saved - gi) * tokens / sp_div  # fc2's input, the combined rows
    return out


__all__ = ["FORMATS", "QUANT_FILES", "module_weights", "saved_delta", "split_quant",
           "weight_delta"]
