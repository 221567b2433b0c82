"""What the pinned transformers decides about a config.json beyond one family's keys,
read from ``ledger/io/data/hf_transformers.json`` (written by ``tools/hf_tables.py``):

- ``family_of``: the model_type whose modeling file builds an ``architectures`` class
  (``models/auto/modeling_auto.py``'s causal-LM and image-text mappings). A config whose
  model_type names remote code (Kimi-K2: ``kimi_k2``, ``DeepseekV3ForCausalLM``) is read
  as the family its class belongs to.
- ``class_defaults``: a config class's default for each key a reader requires, which
  ``PreTrainedConfig.from_dict`` fills in when the file omits it (Gemma-3-27B-it's
  text_config has no vocab_size: Gemma3TextConfig's 262,208).
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def _tables() -> dict:
    text = resources.files("ledger.io").joinpath("data/hf_transformers.json").read_text()
    return json.loads(text)


def class_defaults(model_type: str) -> dict:
    """The config class's defaults of the keys the ledger requires ({} if none known)."""
    return _tables()["defaults"].get(model_type, {})


def family_of(architectures: object) -> tuple[str, str] | None:
    """(class name, model_type) of the first class in ``architectures`` transformers maps
    to a model_type, or None."""
    if not isinstance(architectures, list):
        return None
    table = _tables()["architectures"]
    for name in architectures:
        if isinstance(name, str) and name in table:
            return name, table[name]
    return None


def transformers_version() -> str:
    return _tables()["transformers"]
