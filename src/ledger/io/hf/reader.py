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

import math
import os
import re
from pathlib import Path

from ledger.errors import LedgerError, clip
from ledger.io.files import parse_json, read_text
from ledger.io.hf.tables import class_defaults, family_of, transformers_version
from ledger.model import ModelSpec

DEFAULT_SEQ = 4096
_REQUIRED = object()
_STAND_IN = {int: 64, bool: False, float: 0.0, str: "", list: []}  # while reading on
_KINDS = {int: "an integer", bool: "true or false", float: "a number", str: "a string",
          list: "a list of integers"}


class Reader:
    """Typed access to one config.json: every read names its key when it refuses."""

    def __init__(self, cfg: dict, kind: str):
        self.read: set[str] = set()  # every key a reader looked at
        self.cfg, self.kind = _Tracked(cfg, self.read), kind
        self.required: list[str] = []  # the keys read without a default
        self.missing: list[str] = []  # those of them the config lacks
        self.notes: list[str] = []  # what the user should hear (one stderr line each)

    def _list(self, key: str, default, item: type):
        self.read.add(key)
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(_is(v, item) for v in value):
            words = {int: "integers", str: "strings", float: "numbers"}[item]
            raise LedgerError("config.json", f"{key!r} must be a list of {words}, got "
                                             f"{value!r}")
        return value

    def sub(self, key: str) -> dict:
        """A nested config (DBRX's attn_config, a composite's text_config), or {}."""
        self.read.add(key)
        value = self.cfg.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise LedgerError("config.json", f"{key!r} must be an object, got {value!r}")
        return value

    def get(self, key: str, default: object = _REQUIRED, typ: type = int,
            nullable: bool = False, list_of: type | None = None):
        """``cfg[key]`` checked to be ``typ`` (or a list of ``list_of``); absent (or null,
        unless ``nullable``) gives ``default``; a required key that is absent takes the
        config class's default (``class_defaults``) or is refused by name (and remembered:
        ``required``); one written null is refused: transformers does not default a null
        (its strict config classes refuse it, one typed ``int | None`` keeps it and the
        model cannot be built: tests/test_hf_counts.py)."""
        if list_of is not None:
            return self._list(key, default, list_of)
        self.read.add(key)
        if default is _REQUIRED:
            self.required.append(key)
            if key in self.cfg and self.cfg[key] is None and not nullable:
                raise LedgerError("config.json", f"{key!r} is null for model_type "
                                                 f"{self.kind!r}: transformers "
                                                 f"{transformers_version()} does not default "
                                                 f"a null, it needs the value")
            if key not in self.cfg and key in class_defaults(self.kind):
                return class_defaults(self.kind)[key]  # as from_dict gives it
        if key in self.cfg and (self.cfg[key] is not None or nullable):
            value = self.cfg[key]
            if value is None or _is(value, typ):
                if typ is float and not math.isfinite(value):
                    raise LedgerError("config.json", f"{key!r} must be a finite number, "
                                                     f"got {value!r}")
                return float(value) if typ is float else value
            raise LedgerError("config.json", f"{key!r} must be {_KINDS[typ]}, got {value!r}")
        if default is _REQUIRED:  # noted; refused with every other missing key at the end
            self.missing.append(key)
            return _STAND_IN.get(typ, 1)
        return default

    def check_complete(self) -> None:
        """Refuse a config without its shape keys, naming all of them at once."""
        if self.missing:
            keys = ", ".join(repr(k) for k in dict.fromkeys(self.missing))
            raise LedgerError("config.json", f"missing key{'s' * (len(self.missing) > 1)} "
                                             f"{keys} for model_type {self.kind!r}")

    def refuse(self, key: str, allowed: object, why: str) -> None:
        """Refuse a value the ledger cannot count (``why`` says what it would change)."""
        self.read.add(key)
        if key in self.cfg and self.cfg[key] is not None and self.cfg[key] != allowed:
            raise LedgerError("config.json", f"{key!r} = {self.cfg[key]!r} is not supported "
                                             f"for model_type {self.kind!r} ({why})")

    def ignore(self, *keys: str) -> None:
        """Keys a reader has looked at and found to change nothing for this config (a
        window list under use_sliding_window = false)."""
        self.read.update(keys)

    def unread_structure(self) -> list[str]:
        """Keys that shape the stack layer by layer (``STRUCTURE``: layer-type lists,
        windows, patterns, per-layer indices) which this config sets to something other
        than a no-op and the family's reader did not read: what transformers' class for
        the model_type would ignore, so a renamed config (MiniMax-M1's attn_type_list
        under model_type 'minimax') would be counted as another model."""
        top = [k for k, v in self.cfg.items() if k not in self.read and STRUCTURE.search(k)
               and not _no_op(v) and (isinstance(v, list) or not k.endswith("_layers"))
               and not self._restated(k, v)]
        # a sub-dict no reader looked at which lays out layers (Kimi-Linear's
        # linear_attn_config.full_attn_layers, which main read as the class default)
        nested = [f"{k}.{sub}" for k, v in self.cfg.items()
                  if k not in self.read and k not in SUB_CONFIGS and isinstance(v, dict)
                  and "model_type" not in v  # another tower's own config (Moshi's depth decoder)
                  for sub, w in v.items() if STRUCTURE.search(sub) and not _no_op(w)
                  and (isinstance(w, list) or not sub.endswith("_layers"))]
        return top + nested

    def _restated(self, key: str, value: object) -> bool:
        """``key`` is an older name of a key the reader read, holding the same value
        (``ALIASES``): the same setting said twice, which changes nothing."""
        read = ALIASES.get(key)
        return read in self.read and read in self.cfg and self.cfg[read] == value

    def layer_types(self, layers: int, default: list[int]) -> tuple[int, ...] | None:
        """Indices of the local layers: from an explicit ``layer_types`` list, else
        ``default``. None when there are none."""
        self.read.add("layer_types")
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


class _Tracked(dict):
    """The config, remembering each key a reader asks for (``Reader.read``)."""

    def __init__(self, cfg: dict, seen: set):
        super().__init__(cfg)
        self.seen = seen

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.seen.add(key)
        return super().__contains__(key)


_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
# config keys that lay out the stack layer by layer (what a reader must read or refuse)
STRUCTURE = re.compile(r"(layer_types|type_list|_types$|pattern|window|layer_freq|_interval$|"
                       r"_step$|_period$|_offset$|_ids$|_idxs$|_indices$|_layers$)")


# sub-dicts that are not the text model's layout: read by their own readers (quantization,
# a composite's other towers) or carrying no layer layout of the decoder
SUB_CONFIGS = ("quantization_config", "vision_config", "audio_config", "text_config",
               "rope_scaling", "rope_parameters", "auto_map")

# an older name of a layout key -> the key the readers read. google/gemma-2-9b's
# config.json carries sliding_window_size beside sliding_window (both 4096): the name of
# google/gemma_pytorch gemma/config.py (GemmaConfig.sliding_window_size), which
# transformers' Gemma2Config does not read. Accepted only when it restates the read value.
ALIASES = {"sliding_window_size": "sliding_window"}


def _no_op(value: object) -> bool:
    """A setting that lays out nothing: unset, false, empty, or every layer full
    attention."""
    if value is None or value is False or value == [] or value == {}:
        return True
    return isinstance(value, list) and all(v in ("full_attention", "attention")
                                           for v in value)


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


def _load(path: Path, what: str = "config.json") -> dict:
    """The config's top-level JSON object, or a one-line refusal saying what is wrong."""
    cfg = parse_json(read_text(str(path), "model"), path, what, constants=True)
    if not isinstance(cfg, dict):
        raise LedgerError(what, f"{clip(str(path))} must hold a JSON object, got a "
                                f"{type(cfg).__name__}")
    return cfg


def read_config(cfg: dict, name: str = "") -> tuple[ModelSpec, tuple[str, ...]]:
    """A ModelSpec from a parsed config.json, and the notes the reader has for the user
    (a composite's text model read in its place; a remote-code model_type read as the
    family of its ``architectures``). A family the ledger cannot count is refused in one
    line naming what it lacks; so is a key that changes the model which the family's
    reader does not read (``STRUCTURE``)."""
    from ledger.io.hf.families import FAMILIES, REMOTE

    kind = cfg.get("model_type")
    if not isinstance(kind, str):
        raise LedgerError("config.json", f"'model_type' must be a string, got {kind!r}")
    readers = {**FAMILIES, **{k: fn for k, (fn, _) in REMOTE.items()}}
    cfg, kind, notes = _family(cfg, kind, readers)
    r = Reader(cfg, kind)
    try:
        fields, capacity = readers[kind](r)
    except LedgerError:
        r.check_complete()  # a refusal that a missing shape key caused: name the keys
        raise
    r.check_complete()
    r.refuse("add_cross_attention", False, "an encoder-decoder's cross-attention")
    unread = r.unread_structure()
    if unread:
        raise LedgerError("config.json", f"{', '.join(unread)} would change the model, but "
                                         f"model_type {kind!r} does not read "
                                         f"{'them' if len(unread) > 1 else 'it'} (transformers' "
                                         f"class for it ignores {'them' if len(unread) > 1 else 'it'}"
                                         f"): is the model_type right?")
    seq = min(capacity, DEFAULT_SEQ)
    family = REMOTE[kind][1] if kind in REMOTE else kind  # module names peft matches
    spec = ModelSpec(name=name or clip(cfg.get("_name_or_path") or kind), seq_len=seq,
                     seq_default=True, family=family, **fields)
    return spec, notes + tuple(r.notes)


def _family(cfg: dict, kind: str, families) -> tuple[dict, str, tuple[str, ...]]:
    """The config and model_type a reader takes: a remote-code model_type by the family
    of its ``architectures`` (as its auto_map builds it), a composite by its text model."""
    from ledger.io.hf.families import COMPOSITES

    notes: tuple[str, ...] = ()
    if kind not in families and kind not in COMPOSITES:
        found = family_of(cfg.get("architectures"))
        if found is not None:
            notes = (f"model_type {kind!r} is not a transformers family; read as "
                     f"{found[1]!r}, the family of its architectures {found[0]!r}",)
            cfg, kind = {**cfg, "model_type": found[1]}, found[1]
    if kind not in families and isinstance(cfg.get("text_config"), dict):
        cfg, more = _text_model(cfg, kind)
        kind, notes = cfg["model_type"], notes + more
    if kind in COMPOSITES and kind not in families:
        raise LedgerError("model_type", f"{kind!r} wraps a vision tower: its text model is "
                                        f"read from 'text_config' (model_type "
                                        f"{COMPOSITES[kind]!r}), which this config lacks")
    if kind not in families:
        import difflib

        close = difflib.get_close_matches(kind, list(families) + list(COMPOSITES), n=3)
        arch = cfg.get("architectures")
        raise LedgerError("model_type", f"unsupported model_type {kind!r}"
                                        f"{f' (architectures {arch})' if arch else ''}: "
                                        f"neither a family the ledger reads nor one of "
                                        f"theirs by its architectures"
                                        f"{'; close: ' + ', '.join(close) if close else ''}"
                                        f" (docs/models.md lists them)")
    return cfg, kind, notes


def _text_model(cfg: dict, kind: str) -> tuple[dict, tuple[str, ...]]:
    """A composite (a vision or audio tower beside a language model, e.g. Gemma 3,
    Llama 4, GOT-OCR2): its ``text_config``, when that is a decoder the ledger reads; a
    text_config without a model_type is the composite's own text class's."""
    from ledger.io.hf.families import COMPOSITES, TEXT_AS

    text = cfg["text_config"]
    inner = TEXT_AS.get(kind) or text.get("model_type", COMPOSITES.get(kind))
    if not isinstance(inner, str):
        raise LedgerError("config.json", f"'text_config' of model_type {kind!r} has no "
                                         f"model_type")
    towers = sorted(k for k, v in cfg.items() if k.endswith("_config") and isinstance(v, dict)
                    and k not in ("text_config", "quantization_config", "compression_config"))
    counted = (f"{', '.join(towers)} {'is' if len(towers) == 1 else 'are'} not counted"
               if towers else "the rest is not counted")
    note = (f"model_type {kind!r} is a composite: its text model ({inner!r}, text_config) "
            f"is what is counted; {counted}")
    return {**text, "model_type": inner}, (note,)


def spec_from_dict(cfg: dict, name: str = "") -> ModelSpec:
    """A ModelSpec from a parsed config.json (``read_config`` without its notes)."""
    return read_config(cfg, name)[0]


def read_hf_config(path: str | Path, name: str = "") -> tuple[ModelSpec, tuple[str, ...]]:
    """A ModelSpec from a local ``config.json`` (or a folder holding one), and the
    reader's notes (``read_config``)."""
    if str(path) != "" and Path(path).is_dir():  # Path('') would be the current folder
        path = os.path.join(path, "config.json")
    cfg = _load(path)
    path = Path(path)
    folder = path.resolve().parent.name if path.name == "config.json" else path.stem
    name = clip(name or cfg.get("_name_or_path") or folder or "")  # printed: no escapes
    return read_config(cfg, name)


def read_hf_quant(path: str | Path):
    """How a local ``config.json`` says its checkpoint stores the weights: its
    ``quantization_config`` (or ``compression_config``) read as vLLM reads it
    (``ledger.serve.quant.config_quant``), else, in a model folder, the
    ``hf_quant_config.json`` beside it (ModelOpt 0.29 and before write the format only
    there: vLLM 0.22.0 vllm/transformers_utils/config.py:781-793 reads that file when
    config.json has no ``quantization_config``), or None for the model's bf16."""
    from ledger.serve.quant import config_quant, read_quant

    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    stored = config_quant(_load(path))
    sidecar = path.parent / "hf_quant_config.json"
    if stored is None and path.name == "config.json" and sidecar.is_file():
        return read_quant(_load(sidecar, "hf_quant_config.json"), "hf_quant_config.json")
    return stored


def from_hf_config(path: str | Path) -> ModelSpec:
    """A ModelSpec from a local ``config.json`` (or a folder holding one)."""
    return read_hf_config(path)[0]
