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


# the longest context vLLM and SGLang derive from the preset's published config.json
# (ledger.io.hf.max_len: the same number in both engines here), for the presets whose
# release is one config: deepseek-ai/DeepSeek-V3 max_position_embeddings 163840, its yarn
# 4096 x 40 the same (tests/fixtures/serve/deepseek-v3-fp8.json); Qwen/Qwen3-8B and
# Qwen/Qwen3-30B-A3B 40960, no rope scaling (tests/fixtures/hf/released/qwen3-8b.json,
# qwen3-30b-a3b.json). The Llama, Mistral, Mixtral and GPT-3 presets name no one release
# (Llama 3 8B 8,192, Llama 3.1 8B 131,072): not checked
PUBLISHED_MAX_LEN = {
    "deepseek-v3": (163840, "max_position_embeddings=163840"),
    "qwen3-8b": (40960, "max_position_embeddings=40960"),
    "qwen3-30b-a3b": (40960, "max_position_embeddings=40960"),
}


def published(name: str) -> Quant | None:
    """The published checkpoint's format of preset ``name`` (None: bf16)."""
    qc = PUBLISHED.get(name.lower())
    return None if qc is None else read_quant(qc, f"{name}'s published config.json")
