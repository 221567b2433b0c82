"""The longest context a serving engine takes for a ``config.json``, derived as vLLM
derives it, and the refusal of a ``--context`` beyond it.

vLLM's ``_get_and_verify_max_len`` (vllm/config/model.py @18ec6629, the function at the
file's end): the smallest of the length keys the text config sets (``LENGTH_KEYS``);
``model_max_length``, when set, replaces it; a RoPE scaling whose type is not su, longrope
or llama3 multiplies it by its ``factor`` - yarn multiplies
``original_max_position_embeddings`` instead - except on Gemma 3, whose length is already
scaled. A user's max_model_len above that is refused with a ValueError unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN is set ("positions exceeding derived_max_model_len lead to
nan"). SGLang has the same escape, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (its tests
override envs.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN to launch beyond a model's
length); its own derivation is not read here, so vLLM's is applied to both engines.
"""
from __future__ import annotations

from pathlib import Path

# vLLM's possible_keys, in its order
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
UNSCALED = ("su", "longrope", "llama3")  # rope types whose factor vLLM does not apply


def derived_max_len(cfg: dict) -> tuple[int, str] | None:
    """(the derived maximum length, how it was derived) of a text config, or None when it
    sets no length key (vLLM then assumes 2048 only where the user gives none)."""
    found = {k: cfg[k] for k in LENGTH_KEYS if _number(cfg.get(k))}
    if not found:
        return None
    key = min(found, key=lambda k: found[k])
    length, how = found[key], f"{key}={found[key]:g}"
    if _number(cfg.get("model_max_length")):
        length, how = cfg["model_max_length"], f"model_max_length={cfg['model_max_length']:g}"
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if isinstance(rope, dict) and "gemma3" not in str(cfg.get("model_type")):
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if kind not in UNSCALED and _number(factor) and factor != 1:
            if kind == "yarn" and _number(rope.get("original_max_position_embeddings")):
                length = rope["original_max_position_embeddings"]
                how = f"yarn's original_max_position_embeddings={length:g}"
            length, how = length * factor, f"{how} x rope factor {factor:g}"
    return int(length), how


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def check_context(context: int, path: str | Path, engine: str) -> None:
    """Refuse a --context above what the engine derives from the config.json at ``path``."""
    from ledger.errors import LedgerError
    from ledger.io.hf.reader import _load

    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    cfg = _load(path)  # vLLM reads the text config (hf_text_config) of a composite
    text = cfg.get("text_config")
    derived = derived_max_len(text if isinstance(text, dict) else cfg)
    if derived is None or context <= derived[0]:
        return
    allow = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
             "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}.get(engine, "")
    raise LedgerError("context", f"--context {context} is above the model's maximum length "
                                 f"{derived[0]} ({derived[1]} in its config.json): {engine} "
                                 f"refuses it (unless {allow}, where positions beyond it "
                                 f"give nan); give --context {derived[0]} or less")
