"""Decoder families of transformers 5.23.0 the ledger does not count, each with the feature
it lacks: their config.json is refused in one line that names it. Each entry is a family
whose parameters or computation need a part no ModelSpec field describes (their modeling
files, ``transformers/models/<family>/modeling_<family>.py``, show it); a family that gains
the part moves to a reader.
"""
from __future__ import annotations

from ledger.errors import LedgerError

FEATURES = {
    "axk2": "a norm that holds its own MLP (AXK2's input_layernorm.mlp) and a query gate",
    "blt": "the byte latent transformer's local encoder and decoder over byte patches with "
           "hash n-gram embeddings",
    "cpmant": "segment embeddings and a learned relative position bias",
    "doge": "dynamic-mask attention (a learned A and dt projection per head)",
    "dots3_note_text": "layers whose latent-attention ranks differ (three layer shapes) with "
                       "an indexer on some of them",
    "gemma3n_text": "AltUp and Laurel blocks with per-layer embeddings",
    "gemma4_text": "per-layer embeddings (a second embedding table feeding every layer)",
    "git": "a post-LN text decoder over a CLIP tower without a text_config",
    "gpt_neox_japanese": "an attention output bias on the last layer only",
    "hrm_text": "two recurrent stacks iterated in turn (a hierarchical reasoning model)",
    "hy_v4": "hyper-connections (several residual streams mixed per layer)",
    "inkling_text": "short convolutions on keys, values and the residual stream",
    "inkling2_text": "short convolutions on keys, values and the residual stream",
    "jetmoe": "a mixture of attention heads (MoA: experts in attention)",
    "longcat_flash": "zero-computation experts (the experts a token visits vary)",
    "mllama_text_model": "cross-attention layers to a vision encoder",
    "modernbert-decoder": "ModernBERT's layout (an embedding norm, a first layer without an "
                          "attention norm, a prediction head with its own dense and norm)",
    "phi4_multimodal": "vision and audio embedders inside the causal LM (no text_config)",
    "qwen4_exp_text": "hyper-connections (several residual streams mixed per layer)",
    "recurrent_gemma": "RG-LRU recurrent blocks",
    "rwkv": "RWKV's time-mix and channel-mix blocks",
    "xlnet": "permutation language modelling over two-stream relative attention",
    "xlstm": "mLSTM blocks",
    "zamba": "one shared transformer block applied at several layers",
    "zamba2": "shared transformer blocks with per-use LoRA adapters",
    "zaya": "convolutional QK attention",
    "gemma4_unified_assistant": "a speculative-decoding draft that reads its target's KV cache",
    "gemma4_assistant": "a speculative-decoding draft that reads its target's KV cache",
}


def _refusal(feature: str):
    def read(r):
        raise LedgerError("model_type", f"{r.kind!r} needs {feature}, which the ledger does "
                                        f"not model")
    return read


FAMILIES = {kind: _refusal(feature) for kind, feature in FEATURES.items()}
