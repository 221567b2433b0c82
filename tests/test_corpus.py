"""The corpus: every decoder-only causal LM the pinned transformers ships, counted exactly or
refused in one line that names the feature the ledger lacks.

The families are enumerated from transformers' own mappings (``tests/corpus.py``), so a
family added upstream is a new case here, which fails until the ledger counts it or names
what it lacks. Each case feeds the ledger the config.json ``save_pretrained`` writes for the
family's default config (transformers' defaults are released models' shapes) and:

- counts: the total equals transformers' own (``AutoModelForCausalLM.from_config`` on the
  meta device, tied weights once) and, for a mixture of experts, so does the count a token
  touches (total - routed x (1 - k/E), the routed tensors read off the built model); a
  composite (vision + text) is held to its text model, which is what it reports;
- or refuses: in one line (``LedgerError``) naming the missing feature listed in
  ``REFUSED``, never "unsupported model_type".

``REPAIRS``: defaults transformers cannot build itself, with the smallest change that builds
(each with the line that fails); ``NO_CONFIG``: defaults its config class refuses.
"""
from __future__ import annotations

import pytest

corpus = pytest.importorskip("corpus")
pytest.importorskip("transformers")
pytest.importorskip("torch")

from ledger.errors import LedgerError  # noqa: E402
from ledger.io.hf import read_config  # noqa: E402

MEMBERS = corpus.members()


def _head_dim(cfg: dict) -> dict:
    return {"head_dim": cfg["hidden_size"] // cfg["num_attention_heads"]}


REPAIRS = {
    # modeling_dbrx.py:184 reads attn_config.rope_theta, which DbrxAttentionConfig lacks
    "dbrx": lambda c: {"attn_config": {**c["attn_config"], "rope_theta": 10000.0}},
    # configuration_dots1.py:90-95 default the expert counts to None (rednote-hilab/dots.llm1)
    "dots1": lambda c: {"n_routed_experts": 128, "num_experts_per_tok": 6,
                        "n_shared_experts": 2},
    # head_dim defaults to None and getattr(config, "head_dim", h // heads) returns it
    "hunyuan_v1_dense": _head_dim, "hunyuan_v1_moe": _head_dim, "ministral": _head_dim,
    # configuration_nemotron.py:60 num_key_value_heads None; modeling_nemotron.py:238 uses it
    "nemotron": lambda c: {"num_key_value_heads": c["num_attention_heads"]},
    # configuration_lfm2_moe.py:88 layer_types None; Lfm2Config's own fallback is all attention
    "lfm2_moe": lambda c: {"layer_types": ["full_attention"] * c["num_hidden_layers"]},
    # modeling_cohere_compass.py:77 indexes rope_parameters by layer type
    "cohere_compass_text": lambda c: {"rope_parameters": {
        t: {"rope_type": "default", "rope_theta": 10000.0} for t in set(c["layer_types"])}},
    # configuration_qwen4_exp.py:157-161: the QSA indexer fields default to None
    "qwen4_exp_text": lambda c: {"indexer_n_heads": 4, "indexer_kv_heads": 1,
                                 "indexer_head_dim": 256, "indexer_budget": 2048,
                                 "indexer_compress_ratio": 4},
    "qwen4_exp": lambda c: {"text_config": {**c["text_config"], **REPAIRS["qwen4_exp_text"](
        c["text_config"])}},
}
NO_CONFIG = {  # the class's own validation refuses its defaults
    "gemma4_assistant": "configuration_gemma4_assistant.py:80-97 validate_architecture",
    "gemma4_unified_assistant": "configuration_gemma4_unified.py:208 cache layer types",
}

# model_type -> the feature its refusal names (a phrase of the one-line message)
REFUSED: dict[str, str] = {
    "deepseek_v2": "num_experts_per_tok",  # its class defaults top-k to None: no count to hold
    "hunyuan_v1_moe": "2 or more experts",  # its default has one routed expert
    "axk2": "a norm that holds its own MLP",
    "blt": "byte latent transformer",
    "cpmant": "relative position bias",
    "doge": "dynamic-mask attention",
    "dots3_note": "latent-attention ranks differ",
    "dots3_note_text": "latent-attention ranks differ",
    "gemma3n": "AltUp and Laurel blocks",
    "gemma3n_text": "AltUp and Laurel blocks",
    "gemma4": "per-layer embeddings",
    "gemma4_text": "per-layer embeddings",
    "gemma4_unified_assistant": "speculative-decoding draft",
    "git": "without a text_config",
    "gpt_neox_japanese": "output bias on the last layer only",
    "hrm_text": "two recurrent stacks",
    "hy_v4": "hyper-connections",
    "inkling_text": "short convolutions on keys, values and the residual stream",
    "inkling2_text": "short convolutions on keys, values and the residual stream",
    "jetmoe": "mixture of attention heads",
    "longcat_flash": "zero-computation experts",
    "mllama": "cross-attention layers",
    "modernbert-decoder": "ModernBERT's layout",
    "phi4_multimodal": "vision and audio embedders",
    "qwen4_exp": "hyper-connections",
    "qwen4_exp_text": "hyper-connections",
    "recurrent_gemma": "RG-LRU",
    "rwkv": "time-mix and channel-mix",
    "xlnet": "permutation language modelling",
    "xlstm": "mLSTM",
    "zamba": "shared transformer block",
    "zamba2": "shared transformer blocks",
    "zaya": "convolutional QK attention",
}


def ledger_dict(model_type: str) -> dict:
    try:
        cfg = corpus.saved(corpus.config(model_type))
    except Exception as e:  # noqa: BLE001
        if model_type in NO_CONFIG:
            pytest.xfail(f"transformers' default config does not validate: "
                         f"{NO_CONFIG[model_type]}")
        raise AssertionError(f"{model_type}: default config fails: {e}") from e
    if model_type in REPAIRS:
        cfg |= REPAIRS[model_type](cfg)
    return cfg


def reference(cfg: dict, composite: bool):
    kw = {k: corpus.decoded(v) for k, v in cfg.items() if k != "model_type"}
    tc = corpus.config(cfg["model_type"], **kw)
    return corpus.counts(tc.get_text_config() if composite else tc)


def read(model_type: str):
    cfg = ledger_dict(model_type)
    try:
        spec, notes = read_config(cfg)
    except LedgerError as e:
        return cfg, None, str(e)
    return cfg, (spec, notes), None


@pytest.mark.parametrize("model_type", sorted(MEMBERS))
def test_counted_exactly_or_refused_by_feature(model_type):
    cfg, got, refusal = read(model_type)
    if refusal is not None:
        assert "\n" not in refusal
        assert "unsupported model_type" not in refusal, refusal
        assert model_type in REFUSED, f"refused, not listed: {refusal}"
        assert REFUSED[model_type] in refusal, refusal
        return
    assert model_type not in REFUSED, f"counted now: drop it from REFUSED"
    spec, notes = got
    composite = MEMBERS[model_type] == "composite"
    total, active = reference(cfg, composite)
    assert spec.params == total == sum(spec.breakdown.values())
    if active is not None or spec.is_moe:
        assert spec.is_moe and active is not None
        assert spec.active_params == pytest.approx(active, rel=1e-15)
    if composite:
        assert any("text model" in n for n in notes), notes


def test_the_corpus_is_transformers_decoder_families():
    """156 decoder LMs in transformers 5.23.0: 189 causal-LM keys less 14 encoder-decoder
    and 19 encoder ones (139 decoders + 17 composites)."""
    kinds = list(MEMBERS.values())
    assert (len(kinds), kinds.count("decoder"), kinds.count("composite")) == (156, 139, 17)


def test_at_least_120_families_counted():
    exact = [mt for mt in MEMBERS if mt not in REFUSED and mt not in NO_CONFIG]
    assert len(exact) >= 120, f"{len(exact)} counted, {len(REFUSED)} refused"


SHAPE = {"num_hidden_layers": 4, "n_layer": 4, "n_layers": 4, "num_layers": 4,
         "intermediate_size": 96, "vocab_size": 128}  # the shape keys made small
KEEP = {"gpt_neo": ("num_layers",)}  # its attention_types name every default layer


@pytest.mark.parametrize("model_type", sorted(mt for mt in MEMBERS if mt not in REFUSED
                                              and MEMBERS[mt] == "decoder"))
def test_defaults_as_the_config_class_sets_them(model_type):
    """Only the keys the ledger requires, small: every other key takes its config class's
    default on both sides - what checks each default a reader restates."""
    from ledger.io.hf.families import FAMILIES
    from ledger.io.hf import Reader

    cfg = ledger_dict(model_type)
    r = Reader(cfg, cfg["model_type"])
    FAMILIES[cfg["model_type"]](r)
    small = {k: cfg[k] if k in KEEP.get(model_type, ()) else SHAPE.get(k, cfg[k])
             for k in dict.fromkeys(r.required)}
    small = {"model_type": cfg["model_type"], **small, **REPAIRS.get(model_type, lambda c: {})(
        {**cfg, **small}), "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
    spec, _ = read_config(small)
    total, active = reference(small, False)
    assert spec.params == total
    if active is not None:
        assert spec.active_params == pytest.approx(active, rel=1e-15)


@pytest.mark.parametrize("model_type", sorted(mt for mt in MEMBERS if mt not in NO_CONFIG))
def test_class_defaults_table_is_the_config_class(model_type):
    """ledger/io/data/hf_transformers.json (tools/hf_tables.py) holds each config class's
    defaults of the keys a reader requires: the pinned transformers' own."""
    from ledger.io.hf.tables import class_defaults

    own = corpus.config(model_type).to_dict()
    for key, value in class_defaults(model_type).items():
        assert own.get(key) == value, key


def test_architectures_table_is_the_auto_mapping():
    """Each class the table names maps to its model_type in transformers' own auto mappings."""
    from ledger.io.hf.tables import _tables

    ma = corpus.mappings()
    pairs = {(cls, mt) for mapping in (ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                       ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
             for mt, names in mapping.items()
             for cls in ((names,) if isinstance(names, str) else names)}
    for cls, model_type in _tables()["architectures"].items():
        assert (cls, model_type) in pairs
    assert _tables()["transformers"] == corpus._load().__version__
