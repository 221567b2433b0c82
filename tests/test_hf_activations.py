"""Activation bytes of transformers' own decoder layers, measured with saved-tensor hooks
(deduplicated by storage, weights and shared rope tables left out), against the ledger's
``HF`` table. Each case is exact once the residue the table does not model is added,
tensor by tensor, from the config's own numbers (the table would need a per-model fact for
each); the ratio without that residue stays within 3% except where noted.

Configs are written here (no hub access); one forward + backward per case, tiny sizes.
"""
import dataclasses

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.checkpoint import checkpoint  # noqa: E402

from ledger.arch import HF, layer_activations
from ledger.model import ModelSpec
from ledger.verify.activations import saved_tensors

B, S, H, HEADS, KV, D, F = 2, 16, 64, 4, 2, 16, 128
T = B * S
E, K, MOE_F = 4, 2, 32
WINDOW = 4
# MLA: v_head_dim 16 != q/k's 24 under eager (as DeepSeek-V3's 128 vs 192); under sdpa
# v = nope + rope, since with v != q/k torch's CPU SDPA falls back to the math kernel,
# which keeps eager's tensors
Q_LORA, KV_LORA, ROPE, NOPE = 32, 16, 8, 16
V = {"eager": 16, "sdpa": 24}
BASE = dict(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=D,
            intermediate_size=F, vocab_size=128, max_position_embeddings=64)


def _has(field):
    return field in {f.name for f in dataclasses.fields(ModelSpec)}


def _build(name, impl="sdpa"):
    """(config, decoder-layer class, rotary class, ModelSpec kwargs) of one architecture."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as dsv3
    from transformers.models.llama import modeling_llama as llama
    from transformers.models.mixtral import modeling_mixtral as mixtral
    from transformers.models.qwen3 import modeling_qwen3 as qwen3
    from transformers.models.qwen3_moe import modeling_qwen3_moe as qwen3_moe

    spec = dict(hidden=H, heads=HEADS, kv_heads=KV, head_dim=D, ffn_hidden=F)
    if name == "mistral":  # every layer local, window 4 of 16 keys
        from transformers.models.mistral import modeling_mistral as mistral

        return (transformers.MistralConfig(**BASE, sliding_window=WINDOW),
                mistral.MistralDecoderLayer, mistral.MistralRotaryEmbedding, spec)
    if name == "starcoder2":  # LayerNorm, GELU MLP, biases everywhere
        from transformers.models.starcoder2 import modeling_starcoder2 as sc2

        cfg = transformers.Starcoder2Config(**{k: v for k, v in BASE.items() if k != "head_dim"})
        return (cfg, sc2.Starcoder2DecoderLayer, sc2.Starcoder2RotaryEmbedding,
                dict(spec, norm="layernorm", gated_mlp=False, qkv_bias=True, out_bias=True,
                     mlp_bias=True))
    if name == "gemma2":  # four norms, GeGLU, logit soft-capping (eager only)
        from transformers.models.gemma2 import modeling_gemma2 as gemma2

        cfg = transformers.Gemma2Config(**BASE, sliding_window=WINDOW)
        return (cfg, gemma2.Gemma2DecoderLayer, gemma2.Gemma2RotaryEmbedding,
                dict(spec, layer_norms=4, attn_logit_softcap=cfg.attn_logit_softcapping))
    if name == "olmo2":  # post-norms only, qk-norm over all heads at once
        from transformers.models.olmo2 import modeling_olmo2 as olmo2

        cfg = transformers.Olmo2Config(**{k: v for k, v in BASE.items() if k != "head_dim"})
        return (cfg, olmo2.Olmo2DecoderLayer, olmo2.Olmo2RotaryEmbedding,
                dict(spec, qk_norm="full"))
    if name == "llama":
        return (transformers.LlamaConfig(**BASE), llama.LlamaDecoderLayer,
                llama.LlamaRotaryEmbedding, spec)
    if name == "qwen3":
        return (transformers.Qwen3Config(**BASE), qwen3.Qwen3DecoderLayer,
                qwen3.Qwen3RotaryEmbedding, dict(spec, qk_norm="head"))
    if name == "mixtral":
        cfg = transformers.MixtralConfig(**BASE, num_local_experts=E, num_experts_per_tok=K)
        return (cfg, mixtral.MixtralDecoderLayer, mixtral.MixtralRotaryEmbedding,
                dict(spec, num_experts=E, top_k=K))
    if name == "qwen3_moe":
        cfg = transformers.Qwen3MoeConfig(**BASE, num_experts=E, num_experts_per_tok=K,
                                          moe_intermediate_size=MOE_F, norm_topk_prob=True)
        return (cfg, qwen3_moe.Qwen3MoeDecoderLayer, qwen3_moe.Qwen3MoeRotaryEmbedding,
                dict(spec, qk_norm="head", num_experts=E, top_k=K, moe_ffn_hidden=MOE_F))
    cfg = transformers.DeepseekV3Config(
        **{k: v for k, v in BASE.items() if k not in ("head_dim", "num_key_value_heads")},
        num_key_value_heads=HEADS,
        n_routed_experts=E, num_experts_per_tok=K,
        moe_intermediate_size=MOE_F, n_shared_experts=1, q_lora_rank=Q_LORA,
        kv_lora_rank=KV_LORA, qk_rope_head_dim=ROPE, qk_nope_head_dim=NOPE,
        v_head_dim=V[impl],
        first_k_dense_replace=0, n_group=2, topk_group=1)
    return (cfg, dsv3.DeepseekV3DecoderLayer, dsv3.DeepseekV3RotaryEmbedding,
            dict(hidden=H, heads=HEADS, kv_heads=HEADS, ffn_hidden=F, num_experts=E, top_k=K,
                 moe_ffn_hidden=MOE_F, shared_experts=1, attention="mla", q_lora_rank=Q_LORA,
                 kv_lora_rank=KV_LORA, qk_rope_head_dim=ROPE, qk_nope_head_dim=NOPE,
                 v_head_dim=V[impl]))


def measure(name, impl, dtype, full_recompute=False):
    """(saved storages, routed tokens per expert or None) of one forward of the layer;
    ``full_recompute`` runs it under torch's (non-reentrant) activation checkpointing."""
    cfg, layer_cls, rotary_cls, _ = _build(name, impl)
    cfg._attn_implementation = impl
    torch.manual_seed(0)
    layer = layer_cls(cfg, 0)
    with torch.no_grad():  # the layer alone is not initialised by a PreTrainedModel
        for p in layer.parameters():
            p.normal_(0, 0.3)
    layer = layer.to(dtype).train()
    x = torch.randn(B, S, H, dtype=dtype, requires_grad=True)
    pos = torch.arange(S)[None].expand(B, S)
    cos, sin = (t.to(dtype) for t in rotary_cls(cfg)(x, pos))
    mask = None  # sdpa: is_causal, as transformers' own mask builder skips the mask
    if impl == "eager":  # an additive causal mask, built once per model in transformers
        keep = torch.ones(S, S, dtype=torch.bool).tril()
        if name in ("mistral", "gemma2"):  # the sliding window: the last WINDOW keys
            keep &= torch.ones(S, S, dtype=torch.bool).triu(1 - WINDOW)
        mask = torch.zeros(S, S, dtype=dtype).masked_fill(~keep, float("-inf"))[None, None]
    routed = []
    gate = getattr(layer.mlp, "gate", None)
    if gate is not None:  # the router's actual top-k: tokens per expert
        gate.register_forward_hook(lambda m, i, o: routed.append(
            torch.bincount(o[-1].flatten(), minlength=E)))
    skip = [*layer.parameters(), *layer.buffers(), cos, sin] + ([mask] if mask is not None else [])

    def forward(x):
        return layer(x, attention_mask=mask, position_embeddings=(cos, sin), position_ids=pos)

    run = (lambda: checkpoint(forward, x, use_reentrant=False)) if full_recompute else (
        lambda: forward(x))
    kept = saved_tensors(run, skip)
    return kept, (routed[0] if routed else None)


def predict(name, impl, dtype, routed_tokens):
    """The ledger's bytes under the HF table, the capacity factor from the real routing."""
    spec = ModelSpec(name=name, layers=1, vocab=128, seq_len=S, **_build(name, impl)[3])
    cf = None if routed_tokens is None else int(routed_tokens.sum()) / (T * K)
    window = WINDOW if name in ("mistral", "gemma2") else None
    return layer_activations(spec, micro_batch=B, flash=impl == "sdpa", table=HF,
                             act_bytes=torch.tensor([], dtype=dtype).element_size(),
                             capacity_factor=cf, window=window).total_bytes


def residue(name, impl, dtype):
    """What transformers keeps beyond the HF table, tensor by tensor (bytes)."""
    e = torch.tensor([], dtype=dtype).element_size()
    r = {}
    if name == "gemma2":  # Gemma2RMSNorm: (x_hat * (1 + w)).type_as(x), in fp32 (:54-62)
        r["x_hat kept in fp32, not the activation dtype, by 4 norms"] = 4 * T * H * (4 - e)
        r["each norm's fp32 (1 + weight), a per-layer copy"] = 4 * H * 4
    if name == "olmo2":  # Olmo2RMSNorm: (w * x_hat).to(dtype), x_hat in fp32 (:59-64)
        r["x_hat kept in fp32 by the two post-norms, q_norm and k_norm"] = (
            T * (2 * H + HEADS * D + KV * D) * (4 - e))
    if name == "starcoder2" and e != 4:  # CPU's native_layer_norm: mean/rstd in bf16
        r["LayerNorm mean and rstd in the input dtype, not fp32 (CPU kernel)"] = (
            -2 * 2 * T * (4 - e))
    if name in ("mixtral", "qwen3_moe", "deepseek_v3"):  # norm_topk_prob's in-place divide
        r["top-k renormalisation: fp32 sum + fp32 top-k values"] = T * (4 + 4 * K)
    if name == "qwen3_moe":  # modeling_qwen3_moe.py:264 casts the gate weights back
        r["gate weight per routed token in the activation dtype, not fp32"] = -T * K * (4 - e)
    if name == "deepseek_v3":  # modeling_deepseek_v3.py:133-152, group-limited routing
        r["group top-2 scores' int64 indices"] = T * 2 * 8 * 2  # n_group 2
        r["chosen group's int64 index"] = T * 8  # topk_group 1
        r["bool expert mask of masked_fill"] = T * E
        if e != 4:  # F.linear(hidden.type(float32), weight.type(float32))
            r["router's fp32 copy of its input"] = T * H * 4
            r["router's fp32 copy of its weight"] = E * H * 4
        if e == 4:  # kv_a_layernorm's input is a view of the whole compressed output
            r["rope key columns of the compressed latent"] = T * ROPE * 4
    return r


# where the unmodelled residue exceeds 3% in bf16 at these sizes, and why
BEYOND_3_PERCENT = {"deepseek_v3": "the router's fp32 copies of its input and weight",
                    "olmo2": "Olmo2RMSNorm keeps x_hat in fp32 (the weight multiplies first)"}
MODELS = ["llama", "starcoder2", "olmo2", "qwen3", "mixtral", "qwen3_moe", "deepseek_v3"]
NEEDS = {"qwen3": "qk_norm", "qwen3_moe": "qk_norm", "deepseek_v3": "kv_lora_rank"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("name", MODELS)
def test_hf_layer_matches_ledger(name, impl, dtype):
    if name in NEEDS and not _has(NEEDS[name]):
        pytest.skip(f"ModelSpec has no {NEEDS[name]} field yet (helper 'models')")
    kept, routed = measure(name, impl, dtype)
    got = sum(s.nbytes for s in kept)
    want = predict(name, impl, dtype, routed)
    explained = sum(residue(name, impl, dtype).values())
    assert got == want + explained, (got, want, explained, kept)
    if routed is not None:  # the routing is real: uneven, every token to top_k experts
        assert int(routed.sum()) == T * K and int(routed.max()) > int(routed.min())
    if name not in BEYOND_3_PERCENT:
        assert abs(got - want) / got <= 0.03


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_sliding_window_keeps_every_score_in_transformers(dtype):
    """transformers' eager attention applies a sliding window as an additive mask over
    the full s x s scores: the HF table (scores_over_window=False) keeps s keys, and the
    measured bytes equal the same layer's without a window."""
    kept, _ = measure("mistral", "eager", dtype)
    got = sum(s.nbytes for s in kept)
    assert got == predict("mistral", "eager", dtype, None) == predict("llama", "eager", dtype, None)


@pytest.mark.parametrize("name", ["llama", "mixtral"])
def test_full_recompute_keeps_the_layer_input(name):
    kept, _ = measure(name, "sdpa", torch.bfloat16, full_recompute=True)
    spec = ModelSpec(name=name, layers=1, vocab=128, seq_len=S, **_build(name)[3])
    want = layer_activations(spec, micro_batch=B, table=HF, recompute="full").total_bytes
    assert sum(s.nbytes for s in kept) == want == T * H * 2  # x in bf16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gemma2_post_norms_and_softcap(dtype):
    """Gemma 2: pre- and post-norms (their outputs feed the residual, unsaved), GeGLU,
    soft-capped scores (tanh's output kept), the sliding window an additive mask."""
    kept, _ = measure("gemma2", "eager", dtype)
    want = predict("gemma2", "eager", dtype, None)
    got = sum(s.nbytes for s in kept)
    assert got == want + sum(residue("gemma2", "eager", dtype).values()), (got, want, kept)


def table_rows():
    """(model, attention, dtype, measured, ledger, explained) for every case above."""
    cases = [(n, i) for n in MODELS for i in ("sdpa", "eager")]
    cases += [("mistral", "eager"), ("gemma2", "eager")]
    for name, impl in cases:
        for dtype in (torch.bfloat16, torch.float32):
            kept, routed = measure(name, impl, dtype)
            want = predict(name, impl, dtype, routed)
            yield (name, impl, str(dtype)[6:], sum(s.nbytes for s in kept), int(want),
                   sum(residue(name, impl, dtype).values()))


if __name__ == "__main__":  # PYTHONPATH=src python tests/test_hf_activations.py
    print(f"{'model':<12}{'attn':<6}{'dtype':<9}{'measured B':>11}{'ledger B':>10}"
          f"{'ratio':>7}{'explained B':>12}")
    for name, impl, dt, got, want, explained in table_rows():
        print(f"{name:<12}{impl:<6}{dt:<9}{got:>11}{want:>10}{got / want:>7.3f}{explained:>12}")
