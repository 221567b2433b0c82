"""Import a Hugging Face ``config.json`` into a ModelSpec, family by family.

Each family's defaults are the ones its ``transformers`` config class applies when a
key is absent (``hf_families`` cites the lines); the shape keys themselves (layers,
width, heads, vocabulary, MLP width) are required: a sizing tool must not guess a
model's width. Every value is type-checked and named when wrong; a value the ledger
cannot represent is refused by name, never dropped.

A config's ``max_position_embeddings`` is a capacity, not a training length: the run's
sequence length defaults to min(max_position_embeddings, 4096) (``DEFAULT_SEQ``) and
is flagged ``seq_default`` so reports can say so; ``--seq`` sets it.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ledger.errors import LedgerError
from ledger.io.launch import read_text
from ledger.model import ModelSpec

DEFAULT_SEQ = 4096
_REQUIRED = object()
_KINDS = {int: "an integer", bool: "true or false", float: "a number", str: "a string",
          list: "a list of integers"}


class Reader:
    """Typed access to one config.json: every read names its key when it refuses."""

    def __init__(self, cfg: dict, kind: str):
        self.cfg, self.kind = cfg, kind

    def get(self, key: str, default: object = _REQUIRED, typ: type = int,
            nullable: bool = False):
        """``cfg[key]`` checked to be ``typ``; absent (or null, unless ``nullable``)
        gives ``default``; a required key that is absent is refused by name."""
        if key in self.cfg and (self.cfg[key] is not None or nullable):
            value = self.cfg[key]
            if value is None or _is(value, typ):
                if typ is float and not math.isfinite(value):
                    raise LedgerError("config.json", f"{key!r} must be a finite number, "
                                                     f"got {value!r}")
                return float(value) if typ is float else value
            raise LedgerError("config.json", f"{key!r} must be {_KINDS[typ]}, got {value!r}")
        if default is _REQUIRED:
            raise LedgerError("config.json", f"missing key {key!r} for model_type "
                                             f"{self.kind!r}")
        return default

    def refuse(self, key: str, allowed: object, why: str) -> None:
        """Refuse a value the ledger cannot count (``why`` says what it would change)."""
        if key in self.cfg and self.cfg[key] is not None and self.cfg[key] != allowed:
            raise LedgerError("config.json", f"{key!r} = {self.cfg[key]!r} is not supported "
                                             f"for model_type {self.kind!r} ({why})")

    def layer_types(self, layers: int, default: list[int]) -> tuple[int, ...] | None:
        """Indices of the local layers: from an explicit ``layer_types`` list, else
        ``default``. None when there are none."""
        types = self.cfg.get("layer_types")
        if types is not None and (not isinstance(types, list)
                                  or not all(isinstance(t, str) for t in types)):
            raise LedgerError("config.json", f"'layer_types' must be a list of strings, "
                                             f"got {types!r}")
        if types is None:
            local = default
        else:
            if len(types) != layers:
                raise LedgerError("config.json", f"'layer_types' has {len(types)} entries "
                                                 f"for num_hidden_layers({layers})")
            bad = [t for t in types if t not in _LAYER_TYPES]
            if bad:
                raise LedgerError("config.json", f"'layer_types' entry {bad[0]!r} is not "
                                                 f"one of {', '.join(_LAYER_TYPES)}")
            local = [i for i, t in enumerate(types) if t != "full_attention"]
        return tuple(local) if local else None


_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def _is(value: object, typ: type) -> bool:
    if typ is bool:
        return isinstance(value, bool)
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ is list:
        return isinstance(value, list) and all(_is(v, int) for v in value)
    return isinstance(value, typ)


def _load(path: Path) -> dict:
    """The config's top-level JSON object, or a one-line refusal saying what is wrong."""
    text = read_text(str(path), "model")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise LedgerError("config.json", f"{path} is not valid JSON ({e.msg} at line "
                                         f"{e.lineno} column {e.colno})") from None
    except RecursionError:
        raise LedgerError("config.json", f"{path} nests deeper than a JSON reader follows") \
            from None
    if not isinstance(cfg, dict):
        raise LedgerError("config.json", f"{path} must hold a JSON object, got a "
                                         f"{type(cfg).__name__}")
    return cfg


def spec_from_dict(cfg: dict, name: str = "") -> ModelSpec:
    """A ModelSpec from a parsed config.json; refuses unsupported model types by name."""
    from ledger.io.families import FAMILIES, MULTIMODAL

    kind = cfg.get("model_type")
    if not isinstance(kind, str):
        raise LedgerError("config.json", f"'model_type' must be a string, got {kind!r}")
    if kind in MULTIMODAL:
        raise LedgerError("model_type", f"{kind!r} wraps a vision tower the ledger does not "
                                        f"count; pass its text_config as model_type "
                                        f"{MULTIMODAL[kind]!r}")
    if kind not in FAMILIES:
        raise LedgerError("model_type", f"unsupported model_type {kind!r}; supported: "
                                        f"{', '.join(sorted(FAMILIES))}")
    r = Reader(cfg, kind)
    fields, capacity = FAMILIES[kind](r)
    r.refuse("add_cross_attention", False, "an encoder-decoder's cross-attention")
    seq = min(capacity, DEFAULT_SEQ)
    return ModelSpec(name=name or str(cfg.get("_name_or_path") or kind), seq_len=seq,
                     seq_default=True, family=kind, **fields)


def from_hf_config(path: str | Path) -> ModelSpec:
    """A ModelSpec from a local ``config.json`` (or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    cfg = _load(path)
    folder = path.resolve().parent.name if path.name == "config.json" else path.stem
    name = str(cfg.get("_name_or_path") or folder or "")
    return spec_from_dict(cfg, name)
