"""Hybrid layers' caches held to transformers' own, family by family.

As tests/test_serve_hf.py does for attention: for every hybrid model_type the ledger reads
(``ledger.io.hf.hybrids.FAMILIES``, ``ledger.io.hf.kda.FAMILIES``), a tiny config.json
dict goes into the ledger and into transformers 5.23.0, whose model (random weights, bf16, CPU) runs a prefill of 8 tokens and
one decode step with ``use_cache=True``. What each layer's cache then holds - its keys and
values, its conv and recurrent states (LinearAttentionLayer), MiniMax's lightning state
(MiniMaxCache.linear_cache) - is measured tensor by tensor.

- Attention layers: the ledger's ``LayerCache.bytes_at`` equals the keys and values.
- Recurrent layers: transformers keeps what vLLM does not, so both are shown: the
  ledger's ``RecurrentState.transformers_layout()`` equals what transformers holds,
  tensor kind by tensor kind (conv, ssm: elements, columns, dtype, bytes); and vLLM's
  layout differs from it by exactly the two things named - one conv column fewer (k - 1
  against transformers' k) and the ssm state in the model's dtype where transformers keeps
  float32 (Nemotron-H's float32 in both, KDA's float32 in both, MiniMax's bf16 in both).
  vLLM's own figures are held to vLLM's formula by hand in tests/test_serve_hybrid.py.
"""
import math

import pytest

from ledger.io import spec_from_dict
from ledger.io.hf import hybrids, kda

FAMILIES = {**hybrids.FAMILIES, **kda.FAMILIES}
from ledger.serve.cache import layer_caches
from ledger.serve.state import DTYPE_BYTES, state_dtypes

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from test_serve_hf import PROMPT, SMALL, TOKENS, tiny_model  # noqa: E402 (after the skips)

MAMBA = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128, **TOKENS}
GDN = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
       "linear_value_head_dim": 24}
KDA = {"num_key_value_heads": 4, "linear_num_heads": 4, "linear_head_dim": 16,
       "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
       "num_experts": 4, "moe_intermediate_size": 24, "num_experts_per_token": 2}
EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24}
SSD = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "mamba_chunk_size": 8}

# model_type -> a config with each kind of layer the family has (the Mamba-2 ones with 2
# groups, Falcon-H1's with one, so that both conv widths are exercised)
CASES = {
    "mamba": {**MAMBA, "state_size": 8, "conv_kernel": 3},
    "falcon_mamba": {**MAMBA, "state_size": 8},
    "mamba2": {**MAMBA, "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 16,
               "chunk_size": 8},
    "jamba": {**SMALL, "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1, "num_experts": 4, "mamba_d_state": 8},
    "bamba": {**SMALL, **SSD, "attn_layer_indices": [1], "mamba_n_groups": 2},
    "granitemoehybrid": {**SMALL, **SSD, "layer_types": ["mamba", "attention"] * 2,
                         "num_local_experts": 4, "shared_intermediate_size": 40},
    "falcon_h1": {**SMALL, **SSD, "mamba_d_ssm": 96, "mamba_n_heads": 6},
    "nemotron_h": {**SMALL, "hybrid_override_pattern": "M*-E", "mamba_num_heads": 8,
                   "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 16,
                   "n_routed_experts": 4, "moe_intermediate_size": 32,
                   "moe_shared_expert_intermediate_size": 48, "head_dim": 16, "chunk_size": 8},
    "qwen3_next": {**SMALL, **GDN, **EXPERTS, "shared_expert_intermediate_size": 40,
                   "head_dim": 16},
    "qwen3_5_text": {**SMALL, **GDN, "head_dim": 16},
    "qwen3_5_moe_text": {**SMALL, **GDN, **EXPERTS, "shared_expert_intermediate_size": 40,
                         "head_dim": 16},
    "olmo_hybrid": {**SMALL, **GDN},
    "kimi_linear": {**SMALL, **KDA, "layer_types": ["linear_attention", "full_attention"] * 2},
    "bailing_hybrid": {**SMALL, **KDA, "layer_group_size": 2, "num_expert_group": 1,
                       "topk_group": 1},
    "minimax": {**SMALL, "num_local_experts": 4, "head_dim": 16,
                "layer_types": ["linear_attention", "full_attention"] * 2},
    "lfm2": {**SMALL, "layer_types": ["conv", "full_attention", "conv", "conv"]},
    "lfm2_moe": {**SMALL, **EXPERTS, "layer_types": ["conv", "full_attention", "conv", "conv"],
                 "num_dense_layers": 1},
    "lfm3": {**SMALL, "head_dim": 16, "num_hidden_layers": 5, "sliding_window": 4},
}


def test_every_hybrid_family_is_measured():
    assert set(CASES) == set(FAMILIES)


def _layers(cache) -> list[dict[str, list]]:
    """Per layer: role ("kv", "conv", "ssm") -> [(shape, dtype name, bytes)]."""
    linear = getattr(cache, "linear_cache", [])  # MiniMax's lightning states
    out = []
    for i, layer in enumerate(cache.layers):
        found = {"kv": [layer.keys, layer.values] if isinstance(
            getattr(layer, "keys", None), torch.Tensor) else [],
            "conv": list(getattr(layer, "conv_states", {}).values()),
            "ssm": list(getattr(layer, "recurrent_states", {}).values())}
        if i < len(linear) and isinstance(linear[i], torch.Tensor):
            found["ssm"].append(linear[i])
        out.append({role: [(tuple(t.shape[1:]), str(t.dtype).removeprefix("torch."),
                            t.numel() * t.element_size()) for t in ts if t is not None]
                    for role, ts in found.items()})
    return out


def measured(kind: str) -> tuple[list, list]:
    """transformers' cache after the prompt, and after one more token."""
    model = tiny_model(kind, **CASES[kind])
    ids = torch.randint(3, 100, (1, PROMPT))
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        cache = getattr(out, "past_key_values", None) or out.cache_params  # Mamba's name
        prefill = _layers(cache)
        key = "past_key_values" if hasattr(out, "past_key_values") else "cache_params"
        out = model(input_ids=ids[:, :1], use_cache=True, **{key: cache},
                    cache_position=torch.tensor([PROMPT]))
        decode = _layers(getattr(out, key))
    return prefill, decode


def _total(tensors) -> int:
    return sum(b for _, _, b in tensors)


@pytest.fixture(scope="module")
def caches():
    """Every family measured once, and its ledger caches (bf16, one GPU)."""
    out = {}
    for kind in CASES:
        spec = spec_from_dict({"model_type": kind, **CASES[kind]})
        ledger = layer_caches(spec, range(spec.layers), 1, 2, state_dtypes(spec))
        out[kind] = (spec, ledger, *measured(kind))
    return out


@pytest.mark.parametrize("kind", CASES)
def test_attention_bytes_equal_transformers(kind, caches):
    spec, ledger, prefill, decode = caches[kind]
    assert [c.bytes_per_token and c.bytes_at(PROMPT) - c.state_bytes for c in ledger] == \
        [_total(layer["kv"]) for layer in prefill]
    assert [c.bytes_per_token and c.bytes_at(PROMPT + 1) - c.state_bytes for c in ledger] == \
        [_total(layer["kv"]) for layer in decode]


@pytest.mark.parametrize("kind", CASES)
def test_transformers_layout_is_what_transformers_keeps(kind, caches):
    """Tensor kind by tensor kind: the conv states' channels, columns and dtype, the
    recurrent states' elements and dtype, and the bytes; the same after a decode step."""
    spec, ledger, prefill, decode = caches[kind]
    for c, pre, dec in zip(ledger, prefill, decode):
        assert [(r, _total(pre[r])) for r in ("conv", "ssm")] == \
            [(r, _total(dec[r])) for r in ("conv", "ssm")]  # constant in the context
        if c.state is None:
            assert pre["conv"] == pre["ssm"] == []
            continue
        hf = c.state.transformers_layout()
        conv = [t for t in hf.tensors if t.conv]
        ssm = [t for t in hf.tensors if not t.conv]
        assert sum(t.shape[0] for t in conv) == sum(s[0][0] for s in pre["conv"])
        assert {t.shape[-1] for t in conv} == {s[0][-1] for s in pre["conv"]}
        assert {t.dtype for t in conv} == {s[1] for s in pre["conv"]}
        assert [math.prod(t.shape) for t in ssm] == [math.prod(s[0]) for s in pre["ssm"]]
        assert [t.dtype for t in ssm] == [s[1] for s in pre["ssm"]]
        assert hf.bytes == _total(pre["conv"]) + _total(pre["ssm"])


# the ssm dtype vLLM keeps against transformers' on CPU, family by family
VLLM_SSM = {"nemotron_h": "float32", "kimi_linear": "float32", "bailing_hybrid": "float32",
            "minimax": "bfloat16"}


@pytest.mark.parametrize("kind", CASES)
def test_vllm_keeps_one_conv_column_fewer_and_its_own_ssm_dtype(kind, caches):
    """vLLM's state = transformers' less one column of every conv state (k - 1 against
    k), with the ssm state in bf16 (auto) where transformers keeps float32, except the
    families that keep float32 in vLLM too, and lightning attention, bf16 in both."""
    spec, ledger, prefill, _ = caches[kind]
    for c, pre in zip(ledger, prefill):
        if c.state is None:
            continue
        conv = [t for t in c.state.tensors if t.conv]
        ssm = [t for t in c.state.tensors if not t.conv]
        assert bool(conv) == bool(pre["conv"])  # lightning attention has no convolution
        if conv:
            channels = sum(s[0][0] for s in pre["conv"])
            (columns,) = {s[0][-1] for s in pre["conv"]}
            assert {t.shape[-1] for t in conv} == {columns - 1}
            assert sum(t.bytes for t in conv) == channels * (columns - 1) * 2  # bf16
        want = VLLM_SSM.get(kind, "bfloat16")
        assert [t.dtype for t in ssm] == [want] * len(pre["ssm"])
        assert sum(t.bytes for t in ssm) == sum(math.prod(s[0]) for s in pre["ssm"]) \
            * DTYPE_BYTES[want]
        if pre["ssm"]:  # LFM2's short convolution keeps no recurrent state
            measured_ssm = {s[1] for s in pre["ssm"]}
            assert measured_ssm == ({"bfloat16"} if kind == "minimax" else {"float32"})
