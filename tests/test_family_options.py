"""The options a family's default config leaves off, counted as transformers counts them.

tests/test_corpus.py holds every family's default; here small configs turn on what the
defaults do not (Falcon's new decoder architecture, OPT without biases, a shared expert, an
indexer, a per-head qk-norm ...), each against transformers 5.23.0's own build on the meta
device (tests/corpus.py), total and active counts alike.
"""
import pytest

from ledger.io import spec_from_dict

corpus = pytest.importorskip("corpus")
pytest.importorskip("transformers")

T = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
S = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
     "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128, **T}
GPT = {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, **T}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24}
MLA = {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8,
       "v_head_dim": 6, "n_routed_experts": 4, "n_shared_experts": 1,
       "moe_intermediate_size": 12, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
       "num_key_value_heads": 4}
CASES = {
    "falcon": [{**S, "new_decoder_architecture": True, "num_kv_heads": 2, "bias": True},
               {**S, "parallel_attn": False, "multi_query": False, "ffn_hidden_size": 80},
               {**S, "new_decoder_architecture": True, "num_kv_heads": 2,
                "num_ln_in_parallel_attn": 1}],
    "gpt_bigcode": [{**GPT, "multi_query": False, "n_inner": 80}],
    "opt": [{**S, "ffn_dim": 80, "enable_bias": False, "layer_norm_elementwise_affine": False}],
    "stablelm": [{**S, "use_parallel_residual": True, "use_qkv_bias": True}],
    "phi": [{**S, "qk_layernorm": True}],
    "persimmon": [{**S, "qk_layernorm": False}],
    "cohere": [{**S, "use_qk_norm": True}],
    "cohere2": [{**S, "sliding_window_pattern": 2, "layer_types": None}],
    "nemotron": [{**S, "attention_bias": True, "mlp_bias": True}],
    "mpt": [{"d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 128, "no_bias": False,
             **T}],
    "gpt_neo": [{"hidden_size": 64, "num_layers": 3, "num_heads": 4, "vocab_size": 128,
                 "attention_types": [[["global", "local", "local"], 1]],
                 "intermediate_size": 80, **T}],
    "gptj": [{**GPT, "n_inner": 80, "rotary_dim": 8}],
    "bloom": [{"hidden_size": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, **T}],
    "xglm": [{"d_model": 64, "num_layers": 2, "attention_heads": 4, "ffn_dim": 80,
              "vocab_size": 128, **T}],
    "hyperclovax": [{**S, "use_post_norm": False}],
    "ernie4_5": [{**S, "use_bias": True}],
    "seed_oss": [{**S, "attention_out_bias": True, "attention_bias": False}],
    "smollm3": [{**S, "use_sliding_window": True, "sliding_window": 8}],
    "granitemoeshared": [{**S, "num_local_experts": 4, "shared_intermediate_size": 40}],
    "ernie4_5_moe": [{**S, "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 24,
                      "moe_layer_start_index": 1, "moe_layer_interval": 2,
                      "moe_num_shared_experts": 1, "moe_layer_end_index": 3}],
    "dbrx": [{"d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 128,
              "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0},
              "ffn_config": {"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2},
              **T}],
    "hunyuan_v1_moe": [{**S, "num_experts": 4, "moe_topk": 2, "head_dim": 16}],
    "aria_text": [{**S, "moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 1}],
    "phimoe": [{**S, "num_local_experts": 4, "lm_head_bias": True}],
    "glm4_moe": [{**S, "n_routed_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 24, "use_qk_norm": True, "first_k_dense_replace": 2,
                  "attention_bias": True}],
    "cohere2_moe": [{**S, **MOE, "intermediate_size": 24, "num_shared_experts": 1,
                     "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
                     "prefix_dense_intermediate_size": 80}],
    "laguna": [{**S, **MOE, "gating": False, "shared_expert_intermediate_size": 0,
                "mlp_layer_types": ["dense"] + ["sparse"] * 3}],
    "afmoe": [{**S, **MOE, "num_shared_experts": 1, "num_dense_layers": 2}],
    "deepseek_v32": [{**S, **MLA, "index_n_heads": 2, "index_head_dim": 8, "index_topk": 16,
                      "mlp_layer_types": ["dense"] + ["sparse"] * 3}],
    "axk1": [{**S, **MLA, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]}],
    "minicpm3": [{**S, **{k: MLA[k] for k in ("q_lora_rank", "kv_lora_rank",
                                              "qk_rope_head_dim", "qk_nope_head_dim",
                                              "v_head_dim")}, "num_key_value_heads": 4}],
    "minimax_m3_vl_text": [{**S, "num_local_experts": 4, "num_experts_per_tok": 2,
                            "intermediate_size": 24, "shared_intermediate_size": 40,
                            "dense_intermediate_size": 80, "head_dim": 16,
                            "mlp_layer_types": ["dense"] + ["sparse"] * 3}],
    "flint": [{**S, **MOE, "shared_expert_intermediate_size": 40, "mlp_only_layers": [0],
               "head_dim": 16}],
    "exaone4": [{**S, "sliding_window_pattern": 2, "layer_types": None}],
    "apertus": [{**S}],
    "bitnet": [{**S}],
    "diffllama": [{**S, "head_dim": 16}],
    "olmo": [{**S}],
    "nanochat": [{**S, "num_key_value_heads": 4}],
}
ROWS = [(kind, i) for kind, cases in CASES.items() for i in range(len(cases))]


@pytest.mark.parametrize("kind,i", ROWS)
def test_option_counts_as_transformers_counts(kind, i):
    cfg = {"model_type": kind, **CASES[kind][i]}
    cfg = {k: v for k, v in cfg.items() if v is not None}
    m = spec_from_dict(cfg)
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    total, active = corpus.counts(corpus.config(kind, **kw))
    assert m.params == total == sum(m.breakdown.values())
    if active is not None:
        assert m.active_params == pytest.approx(active, rel=1e-15)
