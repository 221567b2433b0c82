"""KV-cache bytes held to transformers' own caches, family by family.

For every model_type the ledger reads, a tiny config.json dict goes two ways: into the
ledger (``ledger.io.spec_from_dict`` -> ``ledger.serve.cache``), and into transformers
5.23.0, whose model (random weights, bf16, CPU) runs a prefill of T tokens and one decode
step with ``use_cache=True``. The bytes each layer's cache holds (its DynamicLayer or
DynamicSlidingWindowLayer keys and values: ``numel x element_size``) are the expected
values; the ledger's ``LayerCache.bytes_at`` must equal them layer by layer, at T and at
T + 1. Windows and chunks are 4 tokens, so the prompt of 8 already overruns them.

MLA: transformers 5.23.0 caches the compressed latent and the rotary key
(modeling_deepseek_v3.py:444-459), what vLLM caches, so the two agree; the decompressed
K and V that transformers 4.57 cached are ``decompressed_mla_elements``, held here to the
published DeepSeek-V3 shape by hand.
"""
import pytest

from ledger.io import spec_from_dict
from ledger.io.hf.families import FIRST as FAMILIES  # the families with module names / caches
from ledger.model import deepseek_v3
from ledger.serve.cache import decompressed_mla_elements, layer_caches

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

W = 4  # window / chunk
PROMPT = 8
TOKENS = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128,
         "max_position_embeddings": 64, **TOKENS}
MLA = {"q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
       "v_head_dim": 16, "num_key_value_heads": 4, "n_routed_experts": 4, "n_shared_experts": 1,
       "moe_intermediate_size": 16, "first_k_dense_replace": 1, "num_experts_per_tok": 2,
       "n_group": 1, "topk_group": 1}
QWEN_WINDOW = {"use_sliding_window": True, "sliding_window": W, "max_window_layers": 2}
EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}

# model_type -> the configs whose caches are measured (each kind of layer the family has)
CASES = {
    "llama": [{}],
    "mistral": [{"sliding_window": W}, {"sliding_window": None}],
    "mixtral": [{"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": W}],
    "qwen2": [{}, QWEN_WINDOW],
    "gemma": [{"head_dim": 16}],
    "gpt2": [{"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, "n_positions": 64}],
    "gpt_neox": [{}],
    "qwen3": [{"head_dim": 16}, {"head_dim": 16, **QWEN_WINDOW}],
    "qwen3_moe": [{"head_dim": 16, **EXPERTS}, {"head_dim": 16, **EXPERTS, **QWEN_WINDOW}],
    "qwen2_moe": [{**EXPERTS, "shared_expert_intermediate_size": 20},
                  {**EXPERTS, "shared_expert_intermediate_size": 20, **QWEN_WINDOW,
                   "max_window_layers": 4}],
    "deepseek_v2": [MLA, dict(MLA, q_lora_rank=None)],
    "deepseek_v3": [MLA],
    "llama4_text": [{"intermediate_size_mlp": 80, "num_local_experts": 4, "head_dim": 16,
                     "attention_chunk_size": W}],
    "gemma2": [{"head_dim": 16, "sliding_window": W}],
    "gemma3_text": [{"head_dim": 16, "sliding_window": W, "num_hidden_layers": 6}],
    "gpt_oss": [{"num_local_experts": 4, "head_dim": 16, "sliding_window": W}],
    "phi3": [{"sliding_window": W}],
    "olmo2": [{}],
    "granite": [{}],
    "starcoder2": [{"sliding_window": W}],
}
IDS = [(kind, i) for kind, cases in CASES.items() for i in range(len(cases))]


def test_every_family_is_measured():
    assert set(CASES) == set(FAMILIES)


def _layer_bytes(cache) -> list[int]:
    """Bytes each layer of a transformers cache holds (its keys and values)."""
    return [sum(t.numel() * t.element_size() for t in (layer.keys, layer.values))
            for layer in cache.layers]


def tiny_model(kind: str, **kw):
    """A random transformers model of ``kind``: bf16, eager attention, seeded."""
    config = transformers.AutoConfig.for_model(kind, **kw)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16).eval()


def measured(cfg: dict) -> tuple[list[int], list[int]]:
    """transformers' cache bytes per layer after a PROMPT-token prefill and one more token."""
    model = tiny_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    ids = torch.randint(3, 100, (1, PROMPT))
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        prefill = _layer_bytes(out.past_key_values)
        out = model(input_ids=ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
    return prefill, _layer_bytes(out.past_key_values)


@pytest.mark.parametrize("kind,i", IDS, ids=[f"{k}-{i}" for k, i in IDS])
def test_kv_bytes_equal_transformers_cache(kind, i):
    base = {**TOKENS} if kind == "gpt2" else SMALL
    cfg = {"model_type": kind, **base, **CASES[kind][i]}
    spec = spec_from_dict(cfg)
    caches = layer_caches(spec, range(spec.layers), tp=1, kv_bytes=2)  # bf16, one GPU
    prefill, decode = measured(cfg)
    assert [c.bytes_at(PROMPT) for c in caches] == prefill
    assert [c.bytes_at(PROMPT + 1) for c in caches] == decode


def test_the_windows_are_exercised():
    """The cases hold sliding, chunked and MLA layers, not only full ones."""
    kinds = set()
    for kind, cases in CASES.items():
        base = {**TOKENS} if kind == "gpt2" else SMALL
        for case in cases:
            spec = spec_from_dict({"model_type": kind, **base, **case})
            kinds |= {c.kind for c in layer_caches(spec, range(spec.layers), 1, 2)}
    assert kinds == {"full", "sliding", "chunked", "mla"}


def test_decompressed_mla_is_what_transformers_4_57_cached():
    """DeepSeek-V3: 128 heads x (128 + 64) for K and 128 x 128 for V = 40,960 elements a
    token and layer, against 512 + 64 = 576 for the latent (71.1x)."""
    m = deepseek_v3()
    assert decompressed_mla_elements(m) == 128 * 192 + 128 * 128 == 40_960
    assert layer_caches(m, [0], 1, 2)[0].bytes_per_token == 576 * 2
