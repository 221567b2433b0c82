"""The LM head (the output layer, and an MTP depth's logits through it) under MXFP8, as
Megatron-Core runs it with ``fp8_output_proj``.

Megatron-Core keeps the output layer a BF16 ``ColumnParallelLinear`` outside the FP8 autocast
unless ``fp8_output_proj`` is set (megatron/core/transformer/transformer_config.py L635-638
@d98e8a64: "run the LM-head output projection with a TE ColumnParallelLinear under the
MXFP8 autocast context"; no launch flag in megatron/training/arguments.py there, set by
Megatron-Bridge's recipes). With it, and only with ``fp8`` on and the ``mxfp8`` recipe
(fp8_utils.py L730-744 ``is_mxfp8_output_proj_active``; transformer_config.py L1569-1575
refuses it otherwise), GPTModel builds ``TELMHeadColumnParallelLinear`` instead
(models/gpt/gpt_model.py L271-276), a Transformer Engine linear layer whose forward runs
under ``get_fp8_context`` (extensions/transformer_engine.py L1785-1905): its GEMMs - the
logits, and the backward's input and weight gradients - at the MXFP8 rate. The MTP depths'
logits go through the same output layer. Megatron-Bridge turns it on for DeepSeek-V3 and
gpt-oss MXFP8 on GB200 / GB300 from 0.5.0 (scripts/performance/configs/deepseek/
deepseek_llm_pretrain.py, ``cfg.mixed_precision.fp8_recipe == 'mxfp8'``; v0.6.0
perf_recipes/deepseek/gb300/deepseek_v3.py L157, gb200 L160).

What its MXFP8 copies of the head's input and weight keep is not priced in memory: the
head's BF16 input and weight are what the memory model counts.
"""
from __future__ import annotations

from ledger.frameworks.conventions import of as framework_of

FP8_HEAD_RECIPES = ("mxfp8",)


def fp8_head(cfg) -> bool:
    """Whether the LM head's GEMMs run in MXFP8: ``cfg.fp8_output_proj`` under Megatron with
    the MXFP8 recipe (``FP8_HEAD_RECIPES``); elsewhere the head stays BF16."""
    if not getattr(cfg, "fp8_output_proj", False):
        return False
    fw = framework_of(cfg)
    rec = getattr(fw, "fp8", None)
    return bool(fw.name == "megatron" and rec is not None and rec.name in FP8_HEAD_RECIPES)
