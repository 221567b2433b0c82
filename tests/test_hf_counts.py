"""Parameter counts from config.json against transformers' own model on the meta device.

The expected value of every count here is third-party: transformers 5.23.0 builds
``AutoModelForCausalLM.from_config`` for the same dict under ``torch.device("meta")``
and the test sums ``p.numel()`` over ``model.parameters()`` (tied weights appear once).
Real-size configs are the published ones (Hugging Face hub config.json of each model,
written out here; no hub access); their totals are also checked against the
publishers' rounded figures.
"""
import json

import pytest

from ledger.errors import LedgerError
from ledger.io import from_hf_config, spec_from_dict
from ledger.io.hf.families import FIRST
from ledger.model import ModelSpec

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOKENS = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128, **TOKENS}
MLA = {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8,
       "v_head_dim": 6, "n_routed_experts": 4, "n_shared_experts": 2,
       "moe_intermediate_size": 12, "first_k_dense_replace": 1, "num_experts_per_tok": 2,
       "n_group": 1, "topk_group": 1}

# model_type -> small configs exercising each feature the family has
CASES = {
    "llama": [{}, {"attention_bias": True, "mlp_bias": True, "head_dim": 8},
              {"tie_word_embeddings": True, "num_key_value_heads": 4}],
    "mistral": [{}, {"head_dim": 32, "sliding_window": None}],
    "mixtral": [{"num_local_experts": 4, "num_experts_per_tok": 2}],
    "qwen2": [{}, {"use_sliding_window": True, "max_window_layers": 2},
              {"use_sliding_window": True, "sliding_window": None}],
    "gemma": [{}, {"head_dim": 16, "attention_bias": True}],
    "gpt2": [{"n_embd": 64, "n_layer": 3, "n_head": 4, "vocab_size": 128, "n_positions": 32},
             {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, "n_inner": 80,
              "tie_word_embeddings": False}],
    "gpt_neox": [{}, {"attention_bias": False, "tie_word_embeddings": True}],
    "qwen3": [{}, {"head_dim": 32, "attention_bias": True, "tie_word_embeddings": True}],
    "qwen3_moe": [{"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12},
                  {"num_experts": 0},
                  {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                   "decoder_sparse_step": 2, "mlp_only_layers": [3], "head_dim": 32}],
    "qwen2_moe": [{"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                   "shared_expert_intermediate_size": 20},
                  {"num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 12,
                   "shared_expert_intermediate_size": 20, "decoder_sparse_step": 2,
                   "qkv_bias": False, "mlp_only_layers": [1]}],
    "deepseek_v2": [dict(MLA, q_lora_rank=None), dict(MLA, attention_bias=True),
                    dict(MLA, q_lora_rank=None, attention_bias=True)],
    "deepseek_v3": [MLA, dict(MLA, q_lora_rank=None, first_k_dense_replace=0),
                    dict(MLA, attention_bias=True, n_shared_experts=1)],
    "llama4_text": [{"intermediate_size_mlp": 80, "num_local_experts": 4, "head_dim": 16},
                    {"intermediate_size_mlp": 80, "num_local_experts": 4, "head_dim": 16,
                     "interleave_moe_layer_step": 2, "num_experts_per_tok": 2},
                    {"intermediate_size_mlp": 80, "num_local_experts": 4, "head_dim": 16,
                     "moe_layers": [0, 3], "attention_bias": True}],
    "gemma2": [{"head_dim": 16}, {"head_dim": 16, "tie_word_embeddings": False}],
    "gemma3_text": [{"head_dim": 16}, {"head_dim": 16, "sliding_window_pattern": 2}],
    "gpt_oss": [{"num_local_experts": 4, "head_dim": 16},
                {"num_local_experts": 4, "head_dim": 16, "attention_bias": False}],
    "phi3": [{}, {"num_key_value_heads": 4, "tie_word_embeddings": True}],
    "olmo2": [{}, {"attention_bias": True}],
    "granite": [{"embedding_multiplier": 12.0, "logits_scaling": 16.0,
                 "residual_multiplier": 0.22, "attention_multiplier": 0.0078125},
                {"mlp_bias": True, "attention_bias": True, "tie_word_embeddings": True}],
    "starcoder2": [{}, {"use_bias": False, "tie_word_embeddings": False}],
}


def hf_count(cfg: dict) -> int:
    """transformers' own parameter count for this config.json dict (meta device)."""
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def ledger_spec(tmp_path, cfg: dict) -> ModelSpec:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return from_hf_config(path)


SMALL_CASES = [(kind, i) for kind, cases in CASES.items() for i in range(len(cases))]


@pytest.mark.parametrize("kind,i", SMALL_CASES)
def test_small_config_matches_transformers(tmp_path, kind, i):
    base = {} if kind == "gpt2" else SMALL
    cfg = {"model_type": kind, **base, **CASES[kind][i]}
    m = ledger_spec(tmp_path, cfg)
    assert m.params == hf_count(cfg) == sum(m.breakdown.values())


def test_every_family_is_tested():
    """The first families, feature by feature here; every family's default config in
    tests/test_corpus.py."""
    assert set(CASES) == set(FIRST)


# Only the keys the ledger requires: every optional key takes the config class's default,
# on both sides. This is what checks the defaults hf_families restates.
REQUIRED_ONLY = {
    "gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4},
    "deepseek_v2": {"num_experts_per_tok": 2},  # DeepseekV2Config defaults it to None
}


@pytest.mark.parametrize("kind", sorted(FIRST))
def test_defaults_match_the_config_class(tmp_path, kind):
    shape = {k: SMALL[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size",
                                   "vocab_size")}
    shape["num_attention_heads"] = 32  # divisible by every family's default kv heads
    if kind == "gpt2":
        shape = {}
    cfg = {"model_type": kind, **shape, **REQUIRED_ONLY.get(kind, {}), **TOKENS}
    assert ledger_spec(tmp_path, cfg).params == hf_count(cfg)


# ---- real sizes: the published config.json of each model -------------------------
REAL = {
    "DeepSeek-V3": {"model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168,
                    "intermediate_size": 18432, "moe_intermediate_size": 2048,
                    "num_hidden_layers": 61, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                    "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
                    "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8,
                    "moe_layer_freq": 1, "first_k_dense_replace": 3, "norm_topk_prob": True,
                    "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
                    "tie_word_embeddings": False},
    "DeepSeek-V2-Lite": {"model_type": "deepseek_v2", "vocab_size": 102400,
                         "hidden_size": 2048, "intermediate_size": 10944,
                         "moe_intermediate_size": 1408, "num_hidden_layers": 27,
                         "num_attention_heads": 16, "num_key_value_heads": 16,
                         "n_shared_experts": 2, "n_routed_experts": 64,
                         "num_experts_per_tok": 6, "kv_lora_rank": 512, "q_lora_rank": None,
                         "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
                         "first_k_dense_replace": 1, "moe_layer_freq": 1,
                         "max_position_embeddings": 163840},
    "Qwen3-30B-A3B": {"model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048,
                      "intermediate_size": 6144, "moe_intermediate_size": 768,
                      "num_hidden_layers": 48, "num_attention_heads": 32,
                      "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
                      "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
                      "max_position_embeddings": 40960, "tie_word_embeddings": False},
    "Qwen3-8B": {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
                 "intermediate_size": 12288, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                 "max_position_embeddings": 40960, "tie_word_embeddings": False},
    "Qwen1.5-MoE-A2.7B": {"model_type": "qwen2_moe", "vocab_size": 151936,
                          "hidden_size": 2048, "intermediate_size": 5632,
                          "moe_intermediate_size": 1408,
                          "shared_expert_intermediate_size": 5632, "num_hidden_layers": 24,
                          "num_attention_heads": 16, "num_key_value_heads": 16,
                          "num_experts": 60, "num_experts_per_tok": 4,
                          "max_position_embeddings": 8192},
    "Llama-4-Scout (text)": {"model_type": "llama4_text", "vocab_size": 202048,
                             "hidden_size": 5120, "intermediate_size": 8192,
                             "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
                             "num_attention_heads": 40, "num_key_value_heads": 8,
                             "head_dim": 128, "num_local_experts": 16,
                             "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
                             "attention_chunk_size": 8192, "use_qk_norm": True,
                             "max_position_embeddings": 10485760},
    "gpt-oss-20b": {"model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
                    "intermediate_size": 2880, "num_hidden_layers": 24,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                    "num_local_experts": 32, "num_experts_per_tok": 4, "sliding_window": 128,
                    "max_position_embeddings": 131072},
    "gpt-oss-120b": {"model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
                     "intermediate_size": 2880, "num_hidden_layers": 36,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                     "num_local_experts": 128, "num_experts_per_tok": 4,
                     "sliding_window": 128, "max_position_embeddings": 131072},
    "gemma-2-9b": {"model_type": "gemma2", "vocab_size": 256000, "hidden_size": 3584,
                   "intermediate_size": 14336, "num_hidden_layers": 42,
                   "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                   "sliding_window": 4096, "attn_logit_softcapping": 50.0,
                   "final_logit_softcapping": 30.0, "max_position_embeddings": 8192},
    "gemma-3-27b (text)": {"model_type": "gemma3_text", "vocab_size": 262208,
                           "hidden_size": 5376, "intermediate_size": 21504,
                           "num_hidden_layers": 62, "num_attention_heads": 32,
                           "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024,
                           "sliding_window_pattern": 6, "max_position_embeddings": 131072},
    "phi-4": {"model_type": "phi3", "vocab_size": 100352, "hidden_size": 5120,
              "intermediate_size": 17920, "num_hidden_layers": 40, "num_attention_heads": 40,
              "num_key_value_heads": 10, "max_position_embeddings": 16384,
              "tie_word_embeddings": False},
    "OLMo-2-1124-7B": {"model_type": "olmo2", "vocab_size": 100352, "hidden_size": 4096,
                       "intermediate_size": 11008, "num_hidden_layers": 32,
                       "num_attention_heads": 32, "num_key_value_heads": 32,
                       "max_position_embeddings": 4096},
    "granite-3.0-8b": {"model_type": "granite", "vocab_size": 49155, "hidden_size": 4096,
                       "intermediate_size": 12800, "num_hidden_layers": 40,
                       "num_attention_heads": 32, "num_key_value_heads": 8,
                       "tie_word_embeddings": True, "embedding_multiplier": 12.0,
                       "logits_scaling": 16.0, "residual_multiplier": 0.22,
                       "attention_multiplier": 0.0078125, "max_position_embeddings": 4096},
    "starcoder2-7b": {"model_type": "starcoder2", "vocab_size": 49152, "hidden_size": 4608,
                      "intermediate_size": 18432, "num_hidden_layers": 32,
                      "num_attention_heads": 36, "num_key_value_heads": 4,
                      "sliding_window": 4096, "max_position_embeddings": 16384},
    "Mistral-Nemo": {"model_type": "mistral", "vocab_size": 131072, "hidden_size": 5120,
                     "intermediate_size": 14336, "num_hidden_layers": 40,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                     "sliding_window": None, "max_position_embeddings": 1024000},
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_config_matches_transformers(tmp_path, name):
    cfg = REAL[name]
    assert ledger_spec(tmp_path, cfg).params == hf_count(cfg)


def test_published_totals_and_active(tmp_path):
    """Publishers' rounded figures: DeepSeek-V3 671B (report, abstract), Qwen3-30B-A3B
    30.5B total / 3.3B activated (model card), Qwen3-8B 8.2B, gpt-oss 116.83B / 20.91B
    total with 5.13B / 3.61B active not counting the input embedding (OpenAI's gpt-oss
    model card, table 1), Llama-4-Scout 17B active, Qwen1.5-MoE-A2.7B 14.3B / 2.7B."""
    spec = {n: ledger_spec(tmp_path, c) for n, c in REAL.items()}
    assert round(spec["DeepSeek-V3"].params / 1e9) == 671
    q = spec["Qwen3-30B-A3B"]
    assert round(q.params / 1e9, 2) == 30.53
    assert 3.3e9 <= q.active_params < 3.4e9  # 3.35B; Qwen's "3.3B" truncates
    assert round(spec["Qwen3-8B"].params / 1e9, 1) == 8.2
    for name, total, active in (("gpt-oss-120b", 116.83, 5.13), ("gpt-oss-20b", 20.91, 3.61)):
        m = spec[name]
        non_embedding = m.active_params - m.breakdown["embedding"]
        assert (round(m.params / 1e9, 2), round(non_embedding / 1e9, 2)) == (total, active)
    assert round(spec["Llama-4-Scout (text)"].active_params / 1e9) == 17
    qm = spec["Qwen1.5-MoE-A2.7B"]
    assert (round(qm.params / 1e9, 1), round(qm.active_params / 1e9, 1)) == (14.3, 2.7)
    assert round(spec["DeepSeek-V2-Lite"].params / 1e9, 1) == 15.7  # DeepSeek-V2 paper


def test_deepseek_v3_active_and_mtp_by_hand(tmp_path):
    """Active = all but the 248 idle routed experts of the 58 MoE layers (each expert
    3 x 7168 x 2048). MTP (report sec. 2.2): one MoE layer + M (7168 x 14336) + three
    RMSNorms; DeepSeek's README_WEIGHTS.md gives "11.5B unique parameters"."""
    m = ledger_spec(tmp_path, REAL["DeepSeek-V3"])
    assert m.active_params == m.params - 58 * 248 * 3 * 7168 * 2048
    mla = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
           + 128 * 128 * 7168)
    moe_layer = mla + 257 * 3 * 7168 * 2048 + 256 * 7168 + 2 * 7168
    assert m.mtp_params == moe_layer + 7168 * 14336 + 3 * 7168
    assert abs(m.mtp_params / 11.5e9 - 1) < 0.01  # 11.61B: DeepSeek's 11.5B is rounded down
    assert m.mtp_params not in (m.params, 0) and m.params == sum(m.breakdown.values())


def test_capacity_is_not_the_training_length(tmp_path):
    m = ledger_spec(tmp_path, REAL["Mistral-Nemo"])  # max_position_embeddings 1,024,000
    assert (m.seq_len, m.seq_default) == (4096, True)
    assert ledger_spec(tmp_path, dict(REAL["Mistral-Nemo"], max_position_embeddings=2048)
                       ).seq_len == 2048
    assert (m.with_seq(8192).seq_len, m.with_seq(8192).seq_default) == (8192, False)


@pytest.mark.parametrize("cfg,message", [
    ({"model_type": "t5"}, "unsupported model_type 't5': neither a family the ledger "
                            "reads nor one of theirs by its architectures"),
    ({"model_type": "llama4"}, "its text model is read from 'text_config' (model_type "
                               "'llama4_text')"),
    ({"model_type": "llama", **SMALL, "attention_bias": "false"},
     "'attention_bias' must be true or false, got 'false'"),
    ({"model_type": "qwen3_moe", **SMALL, "mlp_only_layers": "3"},
     "'mlp_only_layers' must be a list of integers"),
    ({"model_type": "deepseek_v3", **SMALL, **MLA, "moe_layer_freq": 2},
     "'moe_layer_freq' = 2 is not supported"),
    ({"model_type": "gemma2", **SMALL, "layer_types": ["full_attention"]},
     "'layer_types' has 1 entries for num_hidden_layers(4)"),
    ({"model_type": "gemma2", **SMALL, "layer_types": ["global"] * 4},
     "'layer_types' entry 'global' is not one of"),
    ({"model_type": "deepseek_v2", **SMALL, **dict(MLA, num_experts_per_tok=None)},
     "missing key 'num_experts_per_tok'"),
    ({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4,
      "add_cross_attention": True}, "'add_cross_attention' = True is not supported"),
    ({"model_type": "mixtral", **SMALL, "num_local_experts": 1},
     "'num_local_experts' = 1 is not supported"),
    ({"model_type": "qwen3_moe", **SMALL, "num_experts": 1},
     "'num_experts' = 1 is not supported"),
    ({"model_type": "gemma2", **SMALL, "attn_logit_softcapping": "50"},
     "'attn_logit_softcapping' must be a number"),
])
def test_refusals_name_the_key(tmp_path, cfg, message):
    with pytest.raises(LedgerError) as e:
        ledger_spec(tmp_path, cfg)
    assert message in str(e.value) and "\n" not in str(e.value)


DBRX = {"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 128,
        "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0},
        "ffn_config": {"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2}, **TOKENS}


@pytest.mark.parametrize("cfg,key", [
    *(({"model_type": "llama", **SMALL}, k) for k in
      ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
       "vocab_size")),
    (DBRX, "n_heads"), (DBRX, "n_layers"),
])
def test_a_null_shape_key_is_refused_not_defaulted(tmp_path, cfg, key):
    """A shape key written null is not the class default: transformers 5.23.0's strict
    LlamaConfig refuses the null; DbrxConfig (n_heads / n_layers typed ``int | None``)
    keeps None, and the model cannot be built from it. The reader refuses it by name."""
    cfg = {**cfg, key: None}
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        config = transformers.AutoConfig.for_model(cfg["model_type"], **kw)
    except Exception:  # noqa: BLE001 - the strict dataclass's validation error
        pass
    else:
        assert getattr(config, key) is None  # kept, not the class default
        with torch.device("meta"), pytest.raises(Exception):
            transformers.AutoModelForCausalLM.from_config(config)
    with pytest.raises(LedgerError) as e:
        ledger_spec(tmp_path, cfg)
    assert f"{key!r} is null for model_type {cfg['model_type']!r}" in str(e.value)
    assert "\n" not in str(e.value)


def test_sliding_layers_follow_the_config(tmp_path):
    g3 = ledger_spec(tmp_path, REAL["gemma-3-27b (text)"])
    assert [i for i in range(12) if g3.window(i) is None] == [5, 11]  # 5 local : 1 global
    oss = ledger_spec(tmp_path, REAL["gpt-oss-20b"])
    assert (oss.window(0), oss.window(1)) == (128, None)
    scout = ledger_spec(tmp_path, REAL["Llama-4-Scout (text)"])
    assert [scout.window(i) for i in range(4)] == [8192, 8192, 8192, None]  # NoPE every 4th
    assert spec_from_dict(dict(REAL["Mistral-Nemo"], sliding_window=4096)).window(39) == 4096


@pytest.mark.parametrize("name,config", [("deepseek-v3", "DeepSeek-V3"),
                                         ("qwen3-8b", "Qwen3-8B"),
                                         ("qwen3-30b-a3b", "Qwen3-30B-A3B")])
def test_2026_presets_match_transformers(name, config):
    from ledger.model import preset

    m, cfg = preset(name), REAL[config]
    assert m.params == hf_count(cfg)
    assert m.active_params == spec_from_dict(cfg).active_params
    assert m.mtp_params == spec_from_dict(cfg).mtp_params


@pytest.mark.parametrize("name", sorted(REAL))
def test_layer_split_and_stages_sum_to_params(tmp_path, name):
    """The per-layer (split, replicated, routed) split Megatron's stages use adds up to
    transformers' total: nothing counted twice or dropped across PP ranks."""
    from ledger.parallel import ParallelConfig
    from ledger.placement import stage_params

    m = ledger_spec(tmp_path, REAL[name])
    b = m.breakdown
    layers = sum(sum(m.layer_params(moe=m.is_moe_layer(i))) for i in range(m.layers))
    assert layers + b["embedding"] + b["positions"] + m.norm_size + b["output"] == m.params
    if not m.tied_embeddings:  # with pp > 1 a tied embedding is held twice, by design
        # the MTP modules train too, on the last stage (DeepSeek-V3), outside ``params``;
        # the embedding copy Megatron builds for them there is held twice, by design, as a
        # tied one (tests/test_mtp_embedding.py)
        ranks = stage_params(m, ParallelConfig(pp=4), mtp_embedding=False)
        assert sum(d + e for d, e in ranks) == m.params + m.mtp_params


def test_a_config_saved_by_transformers_reads_back(tmp_path):
    """transformers 5 writes Qwen3-MoE's expert count as num_local_experts (its
    attribute_map): a saved config must not fall back to the 128-expert default."""
    kw = {k: v for k, v in SMALL.items()}
    config = transformers.AutoConfig.for_model("qwen3_moe", num_experts=4, num_experts_per_tok=2,
                                               moe_intermediate_size=12, **kw)
    config.save_pretrained(tmp_path)
    m = from_hf_config(tmp_path / "config.json")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert m.num_experts == 4
    assert m.params == sum(p.numel() for p in model.parameters())
