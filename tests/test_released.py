"""Released config.json files (``fixtures/hf/released``, sources in its SOURCES.md), read as
transformers (or the model's remote code) builds them:

- the count equals transformers' own, built on the meta device from the same file (a
  remote-code model_type is built as the transformers class its ``architectures`` or its
  reader names: Kimi-K2 as DeepseekV3ForCausalLM, MiniMax-M1 as MiniMax with the
  layer_types its attn_type_list gives);
- and matches the count its publisher states (``PUBLISHED``: the model card's figure, to
  one unit of its last digit).

Issue 34's three: Kimi-K2 (model_type kimi_k2: refused on d9dfbab with 160 model types),
MiniMax-M1 (minimax_m1: refused; renamed 'minimax': 451.9 B, silently), Gemma-3-27B-it (no
vocab_size in its text_config: refused).
"""
import json
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.io import read_hf_config
from ledger.io.hf import read_config

ROOT = Path(__file__).parent.parent
RELEASED = Path(__file__).parent / "fixtures" / "hf" / "released"
# released config.json files fetched for other issues, held here where they are (each
# with its source in the SOURCES.md beside it)
REUSED = {
    "gpt-oss-120b": "src/ledger/validation/data/hf/gpt-oss-120b.json",
    "qwen3-235b-a22b-instruct-2507": "src/ledger/validation/data/hf/qwen3-235b-a22b.json",
    "nemotron-3-nano-30b-a3b": "src/ledger/validation/data/hf/nemotron-3-nano.json",
    "nemotron-3-super-120b-a12b": "src/ledger/validation/data/hf/nemotron-3-super.json",
    "deepseek-v3": "tests/fixtures/serve/deepseek-v3-fp8.json",
    "gpt-oss-20b": "tests/fixtures/serve/quant/gpt-oss-20b.json",
    "nemotron-nano-9b-v2": "tests/fixtures/serve/nemotron-nano-9b-v2-shape.json",
    "phi-3-mini-4k-instruct": "tests/fixtures/hf/phi-3-mini-4k-instruct.json",
    "starcoder2-7b": "tests/fixtures/hf/starcoder2-7b-shape.json",
}
PATHS = {**{p.stem: p for p in RELEASED.glob("*.json")},
         **{name: ROOT / path for name, path in REUSED.items()}}
# released files the ledger refuses, each in one line naming the feature it lacks
REFUSED: dict[str, str] = {}  # none: DeepSeek-V4-Flash (hyper-connections) is counted now
FILES = sorted(set(PATHS) - set(REFUSED))
B = 10 ** 9

# file -> (total, unit of its last digit, active or None, active's unit); model cards
PUBLISHED = {
    "kimi-k2-instruct": (1000 * B, 1000 * B, 32 * B, B),  # "1T total, 32B activated"
    "minimax-m1-80k": (456 * B, B, None, None),  # "456 billion ... 45.9 B activated"
    "gemma-3-27b-it": (27 * B, B, None, None),  # Gemma 3 27B (text model)
    "llama-3.1-8b": (8 * B, B, None, None),
    "llama-3.2-3b": (3.21 * B, 0.01 * B, None, None),  # "3.21B"
    "qwen2.5-3b": (3.09 * B, 0.01 * B, None, None),  # "3.09B"
    "qwen2.5-7b": (7.61 * B, 0.01 * B, None, None),  # "7.61B"
    "qwen2.5-14b": (14.7 * B, 0.1 * B, None, None),  # "14.7B"
    # the card's "32.5B" is not what its own config builds (transformers: 32,763,876,352,
    # the count above); held to transformers alone
    "qwen2.5-32b": None,
    "qwen3-4b": (4.0 * B, 0.1 * B, None, None),  # "4.0B"
    "qwen3-8b": (8.2 * B, 0.1 * B, None, None),  # "8.2B"
    "qwen3-14b": (14.8 * B, 0.1 * B, None, None),  # "14.8B"
    "qwen3-32b": (32.8 * B, 0.1 * B, None, None),  # "32.8B"
    "qwen3-30b-a3b": (30.5 * B, 0.1 * B, 3.3 * B, 0.1 * B),  # "30.5B, 3.3B activated"
    # the model card's "284B total / 13B activated" (the ledger: 284.33 B, 13.80 B - 13.27 B
    # without the input embedding)
    "deepseek-v4-flash": (284 * B, B, 13 * B, B),
    # the size each publisher names its model by, to the unit of its last digit, where
    # its card gives no finer figure
    # Gemma 2 report (arXiv:2408.00118) Table 2: 590,118,912 embedding + 2,024,517,888
    # non-embedding = 2,614,636,800 (its vocabulary 256,128 rows; the release's 256,000):
    # 2.6 B; the non-embedding count is held exactly below (SOURCES.md)
    "gemma-2-2b": (2.6 * B, 0.1 * B, None, None),
    "gemma-2-9b": (9 * B, B, None, None),
    "gemma-3-1b-it": (1 * B, B, None, None),
    # the Qwen2 blog's comparison table: "7.6B" (its headline table's "7.07B" is not what
    # its config builds, 7,615,616,512 in transformers; SOURCES.md)
    "qwen2-7b": (7.6 * B, 0.1 * B, None, None),
    "qwen2-72b": (72.71 * B, 0.01 * B, None, None),  # the Qwen2 blog's table: "72.71B"
    "qwen2.5-72b-instruct": (72.7 * B, 0.1 * B, None, None),  # "72.7B"
    "qwen3.6-27b": (27 * B, B, None, None),  # its text model; the vision tower not counted
    # "110B" names a model whose weights count 111.21 B (transformers, above)
    "qwen1.5-110b": None,
    "yi-1.5-6b": (6 * B, B, None, None),
    "yi-1.5-34b": (34 * B, B, None, None),
    "llama-3.3-70b-instruct": (70 * B, B, None, None),
    "mistral-7b-instruct-v0.3": (7 * B, B, None, None),
    "mistral-nemo-base-2407": (12 * B, B, None, None),
    "olmo-2-1124-7b-instruct": (7 * B, B, None, None),
    "granite-3.3-8b-instruct": (8 * B, B, None, None),
    "smollm2-1.7b-instruct": (1.7 * B, 0.1 * B, None, None),
    "falcon3-7b-instruct": (7 * B, B, None, None),
    "phi-4-mini-instruct": (3.8 * B, 0.1 * B, None, None),  # its card: "3.8B parameters"
    "phi-3-mini-4k-instruct": (3.8 * B, 0.1 * B, None, None),  # "3.8B parameters"
    "starcoder2-7b": (7 * B, B, None, None),
    "nemotron-nano-9b-v2": (9 * B, B, None, None),
    "deepseek-v2.5": (236 * B, B, 21 * B, B),  # DeepSeek-V2: "236B total, 21B activated"
    "deepseek-v3": (671 * B, B, 37 * B, B),  # "671B total, 37B activated"
    "deepseek-r1": (671 * B, B, 37 * B, B),  # "671B total, 37B activated"
    "qwen3-235b-a22b-instruct-2507": (235 * B, B, 22 * B, B),  # "235B, 22B activated"
    "qwen3-next-80b-a3b-instruct": (80 * B, B, 3 * B, B),  # "80B total, 3B activated"
    "glm-4.7-flash": (30 * B, B, 3 * B, B),  # "30B-A3B"
    # held to transformers alone: the hub's "685B" counts the MTP layer and FP8 scales
    "deepseek-v3.2": None,
    # "109B total, 17B active" counts the vision encoder, which the ledger leaves out
    # (its text model: 107.77 B, 17.17 B active, both as transformers builds it)
    "llama-4-scout-17b-16e-instruct": None,
    "glm-5.1": (744 * B, B, None, None),  # zai-org/GLM-5 README: "744B-A40B" (SOURCES.md)
    # "230B total" rounds up 228.69 B; held to its checkpoint's elements instead
    # (test_minimax_m2_7_counts_its_fp8_checkpoint)
    "minimax-m2.7": None,
    # "48B" names a model of 49.12 B; held to its checkpoint's element count instead
    # (test_kimi_linear_counts_its_checkpoint)
    "kimi-linear-48b-a3b-instruct": None,
    # the active figures of these cards leave the embeddings out (ACTIVE_WITHOUT_EMBEDDINGS)
    "glm-4.5-air": (106 * B, B, None, None),  # "106B total, 12B active"
    "gpt-oss-120b": (117 * B, B, None, None),  # "117B parameters"
    "gpt-oss-20b": (21 * B, B, None, None),  # "21B parameters"
    "nemotron-3-nano-30b-a3b": (31.6 * B, 0.1 * B, None, None),  # "31.6B total"
    "nemotron-3-super-120b-a12b": (120 * B, B, 12 * B, B),  # "120B-A12B" (its name)
}


def load(name: str) -> dict:
    return json.loads(PATHS[name].read_text())


def as_transformers_builds(cfg: dict) -> dict:
    """The config transformers builds for the file: a remote family as the class it names."""
    if cfg["model_type"] == "kimi_k2":  # auto_map: modeling_deepseek.DeepseekV3ForCausalLM
        return {**cfg, "model_type": "deepseek_v3"}
    if cfg["model_type"] == "minimax_m1":  # attn_type_list: 0 lightning, 1 softmax
        kinds = ["full_attention" if c else "linear_attention" for c in cfg["attn_type_list"]]
        return {**{k: v for k, v in cfg.items() if k != "attn_type_list"},
                "model_type": "minimax", "layer_types": kinds}
    return cfg


def transformers_count(cfg: dict) -> tuple[int, float | None]:
    corpus = pytest.importorskip("corpus")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    cfg = as_transformers_builds(cfg)
    kw = {k: corpus.decoded(v) for k, v in cfg.items() if k not in ("model_type", "auto_map")}
    tc = corpus.config(cfg["model_type"], **kw)
    return corpus.counts(tc.get_text_config())


def test_the_corpus_holds_the_released_files():
    assert len(PATHS) >= 40 and set(PUBLISHED) == set(FILES) and set(REFUSED) <= set(PATHS)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_in_one_line_naming_what_it_lacks(name):
    with pytest.raises(LedgerError) as err:
        read_config(load(name))
    assert REFUSED[name] in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", FILES)
def test_counted_as_transformers_builds_it(name):
    cfg = load(name)
    spec, _ = read_config(cfg)
    total, active = transformers_count(cfg)
    assert spec.params == total
    if active is not None:
        assert spec.active_params == pytest.approx(active, rel=1e-12)


@pytest.mark.parametrize("name", FILES)
def test_counted_as_published(name):
    if PUBLISHED[name] is None:
        pytest.skip("its publisher's figure disagrees with its own weights (PUBLISHED)")
    spec, _ = read_hf_config(PATHS[name])
    total, unit, active, a_unit = PUBLISHED[name]
    assert abs(spec.params - total) < unit, spec.params
    if active is not None:
        assert abs(spec.active_params - active) < a_unit, spec.active_params


# file -> (activated as its card states it, unit): figures that leave out the input and
# output tables, which the ledger's active count holds
ACTIVE_WITHOUT_EMBEDDINGS = {
    "minimax-m1-80k": (45.9 * B, 0.1 * B),  # "45.9 billion activated"; 200,064 x 6,144
    "glm-4.5-air": (12 * B, B),  # "12 billion active"; 151,552 x 4,096
    "glm-5.1": (40 * B, B),  # README: "744B parameters (40B active)"; 154,880 x 6,144
    "minimax-m2.7": (10 * B, B),  # MiniMax-M2: "10B activated"; 200,064 x 3,072
}


@pytest.mark.parametrize("name", sorted(ACTIVE_WITHOUT_EMBEDDINGS))
def test_activated_as_published_without_the_embeddings(name):
    spec, _ = read_hf_config(PATHS[name])
    cfg = load(name)
    tables = 2 * cfg["vocab_size"] * cfg["hidden_size"]
    published, unit = ACTIVE_WITHOUT_EMBEDDINGS[name]
    assert abs(spec.active_params - tables - published) < unit


# file -> (parameters outside the input and output tables, unit of the last digit): the
# publisher's own split (SOURCES.md)
NON_EMBEDDING = {
    "gemma-2-2b": (2_024_517_888, 1),  # Gemma 2 report, Table 2
    "gemma-2-9b": (8_324_201_984, 1),  # Gemma 2 report, Table 2
    "qwen2-72b": (70.21 * B, 0.01 * B),  # Qwen2 blog, "# Non-Emb Params"
    "qwen2-7b": (6.5 * B, 0.1 * B),  # Qwen2 blog's comparison table, "# Non-emb Params"
}


@pytest.mark.parametrize("name", sorted(NON_EMBEDDING))
def test_non_embedding_parameters_as_published(name):
    """The publisher's count without the input embedding (and the output layer, untied):
    Gemma 2's to the parameter, though its total counts 128 more vocabulary rows than
    the released file builds (256,128 in the report's Table 1, 256,000 in config.json)."""
    spec, _ = read_hf_config(PATHS[name])
    tables = spec.breakdown["embedding"] + spec.breakdown.get("output", 0)
    published, unit = NON_EMBEDDING[name]
    assert abs(spec.params - tables - published) < unit, spec.params - tables


def test_the_full_attention_interval_lays_out_qwen3_next():
    """Qwen3-Next-80B-A3B's file has no layer_types but full_attention_interval 4, from which
    Qwen3NextConfig derives them (configuration_qwen3_next.py:130-135): refused on main as a
    layout key qwen3_next 'does not read'. Another interval lays out other layers."""
    cfg = load("qwen3-next-80b-a3b-instruct")
    assert read_config(cfg)[0].mixers.count("attention") == 12
    assert read_config({**cfg, "full_attention_interval": 2})[0].mixers.count("attention") == 24
    assert read_config({**cfg, "num_hidden_layers": 10})[0].mixers.count("attention") == 2


def test_kimi_linear_reads_its_layers_from_linear_attn_config():
    """Kimi-Linear-48B-A3B's file lays out its 7 MLA layers as linear_attn_config's
    1-indexed full_attn_layers (4, 8, ..., 24, 27), which transformers reads
    (configuration_kimi_linear.py:128-136). On main the sub-dict was not read: refused for
    moe_layer_freq, and without that key silently counted with the class's every-4th
    default (6 MLA layers, 49,133,074,464)."""
    cfg = load("kimi-linear-48b-a3b-instruct")
    spec = read_config(cfg)[0]
    assert [i + 1 for i, m in enumerate(spec.mixers) if m == "attention"] == [4, 8, 12, 16, 20,
                                                                             24, 27]
    with pytest.raises(LedgerError, match="'moe_layer_freq' = 2 is not supported"):
        read_config({**cfg, "moe_layer_freq": 2})


def test_a_layout_inside_an_unread_sub_dict_is_refused_naming_it():
    """The guard against ignored layout keys looks into sub-dicts no reader read: Kimi-Linear's
    file under model_type deepseek_v3 names linear_attn_config's layer lists."""
    cfg = {k: v for k, v in load("kimi-linear-48b-a3b-instruct").items()
           if k != "moe_layer_freq"}
    with pytest.raises(LedgerError, match=r"linear_attn_config\.full_attn_layers, "
                                          r"linear_attn_config\.kda_layers would change the "
                                          r"model, but model_type 'deepseek_v3' does not read"):
        read_config({**cfg, "model_type": "deepseek_v3"})


# MiniMax-M3's text model in the shape its config class defaults to (transformers 5.23.0
# MiniMaxM3VLTextConfig, whose docstring names the checkpoint MiniMaxAI/MiniMax-M3) and
# the released keys' form that public serving tests quote (moe_layer_freq, three dense
# layers first; sparse_attention_config); no released config.json itself was found
M3_TEXT = {"hidden_size": 6144, "num_hidden_layers": 60, "num_attention_heads": 64,
           "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 200064,
           "intermediate_size": 3072, "dense_intermediate_size": 12288,
           "shared_intermediate_size": 3072, "num_local_experts": 128,
           "num_experts_per_tok": 4, "moe_layer_freq": [0, 0, 0] + [1] * 57}


def test_minimax_m3_is_read_as_transformers_builds_it():
    """On main the composite (model_type minimax_m3_vl, its text_config without a
    model_type) was refused ("'text_config' ... has no model_type"), and its text model's
    moe_layer_freq refused as a key "transformers' class ignores", which
    MiniMaxM3VLTextConfig.__post_init__ reads (configuration_minimax_m3_vl.py L149-152):
    now 425,950,417,920, as transformers builds it (3 dense layers, 57 MoE)."""
    cfg = {"model_type": "minimax_m3_vl", "text_config": M3_TEXT}
    spec, notes = read_config(cfg)
    assert spec.params == 425_950_417_920 and spec.moe_layers == 57
    assert "composite" in notes[0]
    assert (spec.params, spec.active_params) == pytest.approx(transformers_count(cfg))


def test_minimax_m3_sparse_layers_are_refused_not_undercounted():
    """Each sparse attention layer builds a lightning indexer (modeling_minimax_m3_vl.py
    L417, L535-538), 3,932,416 parameters at these sizes: on main sparse_attention_config
    was ignored and 57 of them (224,147,712) silently left out. The ledger does not model
    that indexer: one line naming it; without sparse layers the file is read."""
    sparse = {"use_sparse_attention": True, "sparse_attention_freq": [0, 0, 0] + [1] * 57}
    for text in ({**M3_TEXT, "sparse_attention_config": sparse},
                 {**M3_TEXT, "layer_types": ["full_attention"] * 3
                  + ["minimax_m3_sparse"] * 57}):
        with pytest.raises(LedgerError, match="57 sparse attention layers .* lightning "
                                              "indexer, which the ledger does not count"):
            read_config({"model_type": "minimax_m3_vl", "text_config": text})
    off = {**M3_TEXT, "sparse_attention_config": {"use_sparse_attention": False}}
    assert read_config({"model_type": "minimax_m3_vl", "text_config": off})[0].params \
        == 425_950_417_920


def test_kimi_linear_counts_its_checkpoint():
    """The checkpoint's 20 safetensors files hold 49,122,681,728 elements (a public model
    report of moonshotai/Kimi-Linear-48B-A3B-Instruct, index id 62691149540): the ledger's
    parameters and the 26 routers' e_score_correction_bias of 256 (a buffer in
    transformers, stored in the checkpoint)."""
    spec = read_config(load("kimi-linear-48b-a3b-instruct"))[0]
    assert spec.params + 26 * 256 == 49_122_681_728


def test_glm_5_1_counts_its_checkpoint():
    """GLM-5.1's 282 BF16 safetensors files hold 753,864,139,008 elements (a public model
    report of the checkpoint, index id 62604838642): the 78 layers the ledger counts, the
    MTP layer 78 (one more sparse decoder layer, eh_proj 6,144 x 12,288 and three norms of
    6,144) and the 76 routers' e_score_correction_bias of 256 (buffers in transformers)."""
    cfg = load("glm-5.1")
    with_mtp = read_config({**cfg, "num_hidden_layers": 79})[0].params
    assert read_config(cfg)[0].params < with_mtp
    assert with_mtp + 6144 * 12288 + 3 * 6144 + 76 * 256 == 753_864_139_008


def test_qwen2_5_72b_instruct_counts_its_checkpoint():
    """Its 37 BF16 files hold 72,706,203,648 elements (a public model report of the
    checkpoint, index id 62544871882): every one a parameter."""
    assert read_config(load("qwen2.5-72b-instruct"))[0].params == 72_706_203_648


def test_minimax_m2_7_counts_its_fp8_checkpoint():
    """MiniMax-M2.7's 125 files hold 228,703,644,928 elements (a public model report of the
    checkpoint, index id 62693775865): the ledger's parameters, the 62 routers'
    e_score_correction_bias of 256, and one float32 scale per 128 x 128 block of each FP8
    matrix (weight_block_size): experts w1, w3 [1536, 3072] and w2 [3072, 1536] 12 x 24
    each; q [6144, 3072] and o [3072, 6144] 48 x 24; k, v [1024, 3072] 8 x 24."""
    spec = read_config(load("minimax-m2.7"))[0]
    expert_scales = 62 * 256 * 3 * (12 * 24)
    attention_scales = 62 * (2 * 48 * 24 + 2 * 8 * 24)
    assert spec.params + 62 * 256 + expert_scales + attention_scales == 228_703_644_928


def test_minimax_m2_reads_its_attn_type_list():
    """The file keeps MiniMax-M1's attn_type_list, all 1 (softmax on every layer, which
    MiniMaxM2 builds): refused on main as an unread layout key. A lightning layer (0) is
    refused naming it."""
    cfg = load("minimax-m2.7")
    assert read_config(cfg)[0].mixers is None  # no mixer but attention
    with pytest.raises(LedgerError, match="asks for lightning"):
        read_config({**cfg, "attn_type_list": [0] + [1] * 61})


def test_minimax_m1_serves_ten_softmax_layers_of_kv():
    """10 softmax layers keep a KV cache; the 70 lightning ones a fixed state."""
    spec, _ = read_config(load("minimax-m1-80k"))
    assert spec.mixers.count("attention") == 10 and spec.mixers.count("linear") == 70
