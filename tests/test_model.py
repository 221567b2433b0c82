"""Parameter counts: every preset against its publisher's count, every component summed."""
import json

import pytest

from ledger.errors import LedgerError
from ledger.io import from_hf_config
from ledger.model import PRESETS, ModelSpec, preset

# Published counts: the Hugging Face safetensors totals of the released checkpoints
# (Meta Llama 2/3, Mistral AI), and for GPT-3 the Megatron shape's count
# 12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h)) (Narayanan et al. 2021, eq. for P)
# plus the final LayerNorm's 2h, which that formula leaves out.
PUBLISHED = {
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3-405b": 405_853_388_800,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_matches_published_count(name):
    assert preset(name).params == PUBLISHED[name]


def test_gpt3_175b_is_narayanans_formula():
    l, h, V, s = 96, 12288, 51200, 2048
    narayanan = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    assert preset("gpt3-175b").params == round(narayanan) + 2 * h
    assert round(preset("gpt3-175b").params / 1e9, 1) == 174.6


def test_every_preset_is_tested():
    # the 2026 presets are checked against transformers in test_hf_counts.py
    assert set(PRESETS) == set(PUBLISHED) | {"gpt3-175b", "deepseek-v3", "qwen3-8b",
                                             "qwen3-30b-a3b"}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_layer_split_sums_to_params(name):
    m = preset(name)
    per_layer = [m.layer_params(moe=m.is_moe_layer(i)) for i in range(m.layers)]
    b = m.breakdown
    rest = b["embedding"] + b["positions"] + m.norm_size + b["output"]
    assert sum(sum(t) for t in per_layer) + rest == m.params == sum(b.values())


def test_mixtral_active_params():
    m = preset("mixtral-8x7b")
    # Mistral AI: "12.9B active parameters"
    assert round(m.active_params / 1e9, 1) == 12.9


def test_moe_with_shared_and_dense_layers_counts_each_part():
    m = ModelSpec(name="toy", layers=4, hidden=8, heads=2, vocab=10, seq_len=16,
                  ffn_hidden=32, num_experts=4, top_k=2, moe_ffn_hidden=4, shared_experts=1,
                  first_dense_layers=1)
    b = m.breakdown
    assert b["mlp"] == 1 * 3 * 8 * 32
    assert b["experts"] == 3 * 4 * 3 * 8 * 4
    assert b["shared_experts"] == 3 * 1 * 3 * 8 * 4
    assert b["router"] == 3 * 8 * 4
    assert m.moe_layers == 3


@pytest.mark.parametrize("field,value", [("layers", 0), ("hidden", -1), ("heads", 0),
                                         ("vocab", -5), ("seq_len", 0), ("ffn_hidden", 0)])
def test_bad_model_sizes_are_refused_by_name(field, value):
    kw = dict(name="x", layers=2, hidden=8, heads=2, vocab=10, seq_len=16, ffn_hidden=32)
    kw[field] = value
    with pytest.raises(LedgerError) as e:
        ModelSpec(**kw)
    assert e.value.field == field and str(value) in str(e.value)


def test_kv_heads_must_divide_heads():
    with pytest.raises(LedgerError, match=r"heads\(8\) is not divisible by kv_heads\(3\)"):
        ModelSpec(name="x", layers=2, hidden=16, heads=8, kv_heads=3, vocab=10, seq_len=16,
                  ffn_hidden=32)


def test_unknown_preset_lists_presets():
    with pytest.raises(LedgerError, match="llama3-70b"):
        preset("llama9")


# --- Hugging Face config.json, one per family, against published counts -------------
HF = {
    # Qwen/Qwen2-0.5B: 494,032,768 (tied; q/k/v biases are Qwen2's own)
    "qwen2": ({"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
               "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
               "vocab_size": 151936, "max_position_embeddings": 32768,
               "tie_word_embeddings": True}, 494_032_768),
    # google/gemma-2b: 2,506,172,416 (head_dim 256 and tying are Gemma's defaults)
    "gemma": ({"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
               "num_attention_heads": 8, "num_key_value_heads": 1, "intermediate_size": 16384,
               "vocab_size": 256000}, 2_506_172_416),
    # openai-community/gpt2: 124,439,808 (learned positions, biases, tied: all defaults)
    "gpt2": ({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12},
             124_439_808),
    # EleutherAI/pythia-160m: 162,322,944 (untied, biases)
    "gpt_neox": ({"model_type": "gpt_neox", "hidden_size": 768, "num_hidden_layers": 12,
                  "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50304,
                  "max_position_embeddings": 2048}, 162_322_944),
    # meta-llama/Meta-Llama-3-70B
    "llama": ({"model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
               "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
               "vocab_size": 128256, "max_position_embeddings": 8192}, 70_553_706_496),
    # mistralai/Mistral-7B-v0.1 (kv_heads 8 is Mistral's default)
    "mistral": ({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 32000},
                7_241_732_096),
    # mistralai/Mixtral-8x7B-v0.1 (8 experts, top-2 are Mixtral's defaults)
    "mixtral": ({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 32000},
                46_702_792_704),
}


@pytest.mark.parametrize("family", sorted(HF))
def test_hf_config_families(tmp_path, family):
    cfg, expected = HF[family]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert from_hf_config(path).params == expected
    assert from_hf_config(tmp_path).params == expected  # a folder works too


def test_hf_missing_key_takes_the_class_default(tmp_path):
    """LlamaConfig's defaults (configuration_llama.py: 32 heads, 32 layers, vocab 32000,
    MLP 11008) fill in what the file omits, as transformers' from_dict does: 32 layers of
    4 x 64^2 attention + 3 x 64 x 11008 MLP + 2 norms, 2 x 32000 x 64 embeddings, a norm."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    m = from_hf_config(path)
    assert (m.layers, m.heads, m.vocab, m.ffn_hidden) == (32, 32, 32000, 11008)
    assert m.params == 32 * (4 * 64 * 64 + 3 * 64 * 11008 + 2 * 64) + 2 * 32000 * 64 + 64


def test_hf_missing_key_without_a_class_default_names_it(tmp_path):
    """A remote-code family (MiniMax-M1's) has no transformers class to default from."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "minimax_m1", "hidden_size": 64,
                                "attn_type_list": [0, 1]}))
    with pytest.raises(LedgerError, match="missing keys? .*'num_hidden_layers'.* for "
                                          "model_type 'minimax_m1'"):
        from_hf_config(path)


def test_hf_unknown_model_type(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(LedgerError, match="unsupported model_type 't5'"):
        from_hf_config(path)


def test_hf_malformed_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(LedgerError, match="not valid JSON"):
        from_hf_config(path)


def test_hf_wrong_type(tmp_path):
    path = tmp_path / "config.json"
    cfg = dict(HF["llama"][0], hidden_size="big")
    path.write_text(json.dumps(cfg))
    with pytest.raises(LedgerError, match="'hidden_size' must be an integer"):
        from_hf_config(path)


# --- new fields: checks at construction, FLOPs over windows and for MLA --------------
BASE = dict(name="x", layers=4, hidden=64, heads=4, vocab=100, seq_len=64, ffn_hidden=96)


@pytest.mark.parametrize("extra,field", [
    ({"attention": "mla", "kv_lora_rank": 8, "qk_rope_head_dim": 4}, "qk_nope_head_dim"),
    ({"attention": "gqa"}, "attention"),
    ({"kv_lora_rank": 8}, "kv_lora_rank"),
    ({"v_head_dim": 0}, "v_head_dim"),
    ({"local_layers": (0, 2)}, "local_layers"),
    ({"attn_gate": "sigmoid"}, "attn_gate"),
    ({"index_heads": 4, "index_head_dim": 8, "index_topk": 16}, "index_heads"),
    ({"mixers": ("attention", "mamba", "attention", "attention")}, "mamba"),
    ({"mixers": ("attention",) * 3}, "mixers"),
    ({"mixers": ("attention", "rnn", "attention", "attention")}, "mixers"),
    ({"no_mlp_layers": (5,)}, "no_mlp_layers"),
    ({"embedding_rows": 0}, "embedding_rows"),
    ({"sliding_window": 16, "local_layers": (0, 9)}, "local_layers"),
    ({"sliding_window": 16, "local_layers": (2, 0)}, "local_layers"),
    ({"sliding_window": 0}, "sliding_window"),
    ({"num_experts": 4, "moe_layer_ids": (4,)}, "moe_layer_ids"),
    ({"num_experts": 4, "shared_expert_ffn": 32}, "shared_expert_ffn"),
    ({"shared_experts": 1}, "shared_experts"),
    ({"qk_norm": "rms"}, "qk_norm"),
    ({"qkv_bias": "false"}, "qkv_bias"),
    ({"layer_norms": -1}, "layer_norms"),
    ({"final_logit_softcap": -3.0}, "final_logit_softcap"),
    ({"attention": "mla", "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8,
      "qk_norm": "head"}, "qk_norm"),
])
def test_new_fields_are_checked_by_name(extra, field):
    with pytest.raises(LedgerError) as e:
        ModelSpec(**BASE, **extra)
    assert e.value.field == field and "\n" not in str(e.value)


def test_moe_layer_pattern_and_first_dense_combine():
    m = ModelSpec(**BASE, num_experts=4, moe_layer_ids=(1, 2, 3), first_dense_layers=2)
    assert [m.is_moe_layer(i) for i in range(4)] == [False, False, True, True]
    assert m.moe_layers == 2 and m.breakdown["mlp"] == 2 * 3 * 64 * 96


def _mask_pairs(s, w=None, chunk=None):
    """Brute force: (query, key) pairs a causal mask (with a window or chunks) allows."""
    np = pytest.importorskip("numpy")
    q, k = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    allowed = k <= q
    if w is not None:
        allowed &= q - k < w
    if chunk is not None:
        allowed &= q // chunk == k // chunk
    return int(allowed.sum())


@pytest.mark.parametrize("kind,w", [("sliding", 1024), ("sliding", 3000), ("chunked", 1024),
                                    ("chunked", 1500)])
def test_windowed_attention_flops_count_the_mask(kind, w):
    from ledger.arch import attention_flops_per_token

    s = 4096
    local = ModelSpec(**dict(BASE, seq_len=s), sliding_window=w, local_layers=(0, 2),
                      local_attention=kind)
    pairs = _mask_pairs(s, w=w) if kind == "sliding" else _mask_pairs(s, chunk=w)
    full = _mask_pairs(s)
    # per pair: QK^T and AV, 2 FLOPs each per channel of q_dim = 64, x3 forward+backward
    expected = 3 * 2 * 2 * 64 * (2 * pairs + 2 * full) / s
    assert attention_flops_per_token(local) == pytest.approx(expected, rel=2e-3)


def test_mla_flops_by_hand():
    """DeepSeek-V3 at s = 4096: attention projections as trained (no absorption) and the
    core over 128 heads of 192-wide q/k and 128-wide v (DeepSeek-V2 sec. 2.1.2)."""
    from ledger.arch import matmul_params_per_token, model_flops_per_token

    m = preset("deepseek-v3")
    attn = (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168)
    mlp = 3 * 3 * 7168 * 18432 + 58 * (9 * 3 * 7168 * 2048 + 7168 * 256)
    n = 61 * attn + mlp + 129280 * 7168
    assert matmul_params_per_token(m) == n
    core = 3 * 2 * 128 * (192 + 128) * 61 * 4096 / 2
    assert model_flops_per_token(m) == 6 * n + core


def test_keys_factor_of_gemma3_like_stack():
    """Gemma 3: five local layers of 1024 keys per global one, at s = 8192 the local mean
    is 1024 - 1024^2 / 16384 = 960 keys against 4096 for a global layer."""
    from ledger.arch import keys_factor

    m = ModelSpec(**dict(BASE, layers=12, seq_len=8192), sliding_window=1024,
                  local_layers=(0, 1, 2, 3, 4, 6, 7, 8, 9, 10))
    assert keys_factor(m) == pytest.approx((10 * 960 + 2 * 4096) / (12 * 4096))
    assert keys_factor(ModelSpec(**BASE)) == 1.0
