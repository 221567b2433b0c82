"""The longest context a serving engine takes for a ``config.json``, derived as the
engine derives it, and the refusal of a ``--context`` beyond it.

vLLM (``vllm_max_len``): ``_get_and_verify_max_len`` (vllm/config/model.py @18ec6629, the
file's last function): the smallest of the length keys the text config sets
(``LENGTH_KEYS``); ``model_max_length``, when set, replaces it; a RoPE scaling whose type
is not su, longrope or llama3 multiplies it by its ``factor`` - yarn multiplies
``original_max_position_embeddings`` instead - except on Gemma 3, whose length is already
scaled. A max_model_len above that raises a ValueError unless VLLM_ALLOW_LONG_MAX_MODEL_LEN
is set ("positions exceeding derived_max_model_len lead to nan").

SGLang (``sglang_context_len``): ``get_context_length``
(python/sglang/srt/utils/hf_transformers_utils.py @2aa2e2d0): the first of
``SGLANG_KEYS`` the text config sets, times rope_scaling's ``factor`` unless the scaling
holds ``original_max_position_embeddings`` or its rope_type is llama3; 2048 when none is
set. ``ModelConfig._derive_context_length`` (python/sglang/srt/configs/model_config.py
@8b5e1bbf) raises a ValueError for a --context-length above it unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set.

A config.json that sets no length key is not checked here: the engines would read the
config class's default, which the ledger's tables do not hold.
"""
from __future__ import annotations

from pathlib import Path

# vLLM's possible_keys, in its order
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
UNSCALED = ("su", "longrope", "llama3")  # rope types whose factor vLLM does not apply
# SGLang's CONTEXT_LENGTH_KEYS, in its order (the first set is taken)
SGLANG_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
               "max_position_embeddings")


def vllm_max_len(cfg: dict) -> tuple[int, str] | None:
    """(vLLM's derived maximum length, how it was derived) of a text config, or None when
    it sets no length key."""
    found = {k: cfg[k] for k in LENGTH_KEYS if _number(cfg.get(k))}
    if not found:
        return None
    key = min(found, key=lambda k: found[k])
    length, how = found[key], f"{key}={found[key]:g}"
    if _number(cfg.get("model_max_length")):
        length, how = cfg["model_max_length"], f"model_max_length={cfg['model_max_length']:g}"
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(rope, dict) or "gemma3" in str(cfg.get("model_type")):
        return int(length), how
    # transformers v5 may key the parameters by layer type: vLLM reads each alike
    layers = list(rope.values()) if rope and all(isinstance(v, dict) for v in rope.values()) \
        else [rope]
    factor = 1
    for rp in layers:
        kind = rp.get("rope_type", rp.get("type"))
        if kind not in UNSCALED:
            factor = rp.get("factor", factor) if _number(rp.get("factor")) else factor
            if kind == "yarn" and _number(rp.get("original_max_position_embeddings")):
                length = rp["original_max_position_embeddings"]
                how = f"yarn's original_max_position_embeddings={length:g}"
    if factor != 1:
        length, how = length * factor, f"{how} x rope factor {factor:g}"
    return int(length), how


def sglang_context_len(cfg: dict) -> tuple[int, str] | None:
    """(SGLang's derived context length, how it was derived) of a text config, or None
    when it sets no length key."""
    key = next((k for k in SGLANG_KEYS if cfg.get(k) is not None and _number(cfg[k])), None)
    if key is None:
        return None
    rope, factor = cfg.get("rope_scaling"), 1
    if isinstance(rope, dict) and rope:
        factor = rope.get("factor", 1)
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    how = f"{key}={cfg[key]:g}" + (f" x rope factor {factor:g}" if factor != 1 else "")
    return int(factor * cfg[key]), how


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def check_context(context: int, path: str | Path, engine: str) -> None:
    """Refuse a --context above what the engine derives from the config.json at ``path``."""
    from ledger.io.hf.reader import _load

    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    cfg = _load(path)  # the engines read the text config (hf_text_config) of a composite
    text = cfg.get("text_config")
    derive = sglang_context_len if engine == "sglang" else vllm_max_len
    refuse_context(context, derive(text if isinstance(text, dict) else cfg), engine,
                   "its config.json")


def refuse_context(context: int, derived: tuple[int, str] | None, engine: str,
                   where: str) -> None:
    """One line naming --context and the engine's length, where it is above that."""
    from ledger.errors import LedgerError

    if derived is None or context <= derived[0]:
        return
    allow = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
             "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}.get(engine, "")
    raise LedgerError("context", f"--context {context} is above the model's maximum length "
                                 f"{derived[0]} ({derived[1]} in {where}): {engine} refuses "
                                 f"it (unless {allow}, where positions beyond it give nan); "
                                 f"give --context {derived[0]} or less")
