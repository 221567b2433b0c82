"""What each preset's published checkpoint stores: the ``quantization_config`` of the
release's config.json, or None where the release is the model's bf16.

    deepseek-v3   deepseek-ai/DeepSeek-V3 (and DeepSeek-R1, the same architecture and
                  format): FP8 e4m3 weights with 128 x 128 fp32 block scales, dynamic
                  activations ("quantization_config": {"activation_scheme": "dynamic",
                  "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]},
                  deepseek-ai/DeepSeek-V3 README_WEIGHTS.md "FP8 Weight Documentation";
                  tests/fixtures/serve/deepseek-v3-fp8.json)
    the others    the bf16 releases (meta-llama, mistralai, Qwen: no quantization_config)

A config.json carries its own format (``ledger.serve.quant.config_quant``); a launch
file's model is a training checkpoint, bf16.
"""
from __future__ import annotations

from ledger.serve.quant import Quant, read_quant

PUBLISHED = {
    "deepseek-v3": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                    "weight_block_size": [128, 128]},
}


def published(name: str) -> Quant | None:
    """The published checkpoint's format of preset ``name`` (None: bf16)."""
    qc = PUBLISHED.get(name.lower())
    return None if qc is None else read_quant(qc, f"{name}'s published config.json")
