"""Import a Hugging Face ``config.json`` into a ModelSpec, family by family.

Each family's defaults are the ones its ``transformers`` config class applies when a
key is absent (e.g. Gemma ties its embeddings and uses 256-wide heads, Qwen2 always
carries q/k/v biases, GPT-2 learns its positions). The shape keys themselves are
required: a sizing tool must not guess a model's width.
"""
from __future__ import annotations

import json
from pathlib import Path

from ledger.errors import LedgerError
from ledger.model import ModelSpec

# model_type -> (key names, defaults for optional keys, fixed architecture facts)
_LLAMA_KEYS = {
    "layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
    "ffn_hidden": "intermediate_size", "vocab": "vocab_size", "kv_heads": "num_key_value_heads",
    "head_dim": "head_dim", "seq_len": "max_position_embeddings",
    "tied_embeddings": "tie_word_embeddings",
}
_FAMILIES: dict[str, tuple[dict[str, str], dict[str, object], dict[str, object]]] = {
    "llama": (
        {**_LLAMA_KEYS, "qkv_bias": "attention_bias", "out_bias": "attention_bias",
         "mlp_bias": "mlp_bias"},
        {"kv_heads": None, "head_dim": None, "seq_len": 2048, "tied_embeddings": False,
         "qkv_bias": False, "out_bias": False, "mlp_bias": False},
        {},
    ),
    "mistral": (_LLAMA_KEYS, {"kv_heads": 8, "head_dim": None, "seq_len": 4096 * 32,
                              "tied_embeddings": False}, {}),
    "mixtral": (
        {**_LLAMA_KEYS, "num_experts": "num_local_experts", "top_k": "num_experts_per_tok"},
        {"kv_heads": 8, "head_dim": None, "seq_len": 4096 * 32, "tied_embeddings": False,
         "num_experts": 8, "top_k": 2},
        {},
    ),
    "qwen2": (_LLAMA_KEYS, {"kv_heads": 32, "head_dim": None, "seq_len": 32768,
                            "tied_embeddings": False}, {"qkv_bias": True}),
    "gemma": (_LLAMA_KEYS, {"kv_heads": 16, "head_dim": 256, "seq_len": 8192,
                            "tied_embeddings": True}, {}),
    "gpt2": (
        {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "ffn_hidden": "n_inner",
         "vocab": "vocab_size", "seq_len": "n_positions",
         "tied_embeddings": "tie_word_embeddings"},
        {"ffn_hidden": None, "vocab": 50257, "seq_len": 1024, "tied_embeddings": True},
        {"gated_mlp": False, "norm": "layernorm", "qkv_bias": True, "out_bias": True,
         "mlp_bias": True},
    ),
    "gpt_neox": (
        {**_LLAMA_KEYS, "qkv_bias": "attention_bias", "out_bias": "attention_bias"},
        {"kv_heads": None, "head_dim": None, "seq_len": 2048, "tied_embeddings": False,
         "qkv_bias": True, "out_bias": True},
        {"gated_mlp": False, "norm": "layernorm", "mlp_bias": True},
    ),
}
FAMILIES = tuple(_FAMILIES)


def _load(path: Path) -> dict:
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise LedgerError("model", f"no such file: {path}") from None
    except json.JSONDecodeError as e:
        raise LedgerError("config.json", f"{path} is not valid JSON ({e.msg} at line "
                                         f"{e.lineno} column {e.colno})") from None
    if not isinstance(cfg, dict):
        raise LedgerError("config.json", f"{path} must hold a JSON object")
    return cfg


def from_hf_config(path: str | Path) -> ModelSpec:
    """A ModelSpec from a local ``config.json`` (or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    cfg = _load(path)
    kind = cfg.get("model_type")
    if kind not in _FAMILIES:
        raise LedgerError("model_type", f"unsupported model_type {kind!r} in {path}; "
                                        f"supported: {', '.join(FAMILIES)}")
    keys, defaults, fixed = _FAMILIES[kind]
    fields: dict[str, object] = {}
    for field, key in keys.items():
        if key in cfg and cfg[key] is not None:
            fields[field] = cfg[key]
        elif field in defaults:
            fields[field] = defaults[field]
        else:
            raise LedgerError("config.json", f"missing key {key!r} for model_type {kind!r}")
    if kind == "gpt2":
        fields["learned_positions"] = fields["seq_len"]
        fields["ffn_hidden"] = fields["ffn_hidden"] or 4 * fields["hidden"]
    for field, value in fields.items():
        if field not in ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias") and not (
            value is None or (isinstance(value, int) and not isinstance(value, bool))
        ):
            raise LedgerError("config.json", f"{keys[field]!r} must be an integer, "
                                             f"got {value!r}")
    name = str(cfg.get("_name_or_path") or path.resolve().parent.name or kind)
    return ModelSpec(name=name, **{**fields, **fixed})
