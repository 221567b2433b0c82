"""One function per ``model_type``: config.json keys -> ModelSpec fields.

Each returns (fields, max_position_embeddings). Defaults are those of the transformers
5.23.0 config classes (``transformers/models/<family>/configuration_<family>.py``, the
line of the class attribute cited), the structure that of its modeling file. ``r`` is a
``ledger.io.hf.reader.Reader``: ``r.get(key, default, type)`` type-checks and names the key.
This module holds the families first supported; ``FAMILIES`` gathers every reader.
"""
from __future__ import annotations

from ledger.io.hf import deepseek_v4, dense, hybrids, kda, layouts, moe, unmodelled
from ledger.io.hf.keys import (alternating, bias, decoder, every_layer_window, expert_count,
                            mla, qwen_window, softcaps, sparse_layers, top_k, yarn_mscale)

def llama(r):  # configuration_llama.py:69-84
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    return {**f, **bias(r), "mlp_bias": r.get("mlp_bias", False, bool)}, cap


def granite(r):  # configuration_granite.py:64-86; the four multipliers are scalars
    f, cap = llama(r)
    return f, cap


def mistral(r):  # configuration_mistral.py:68-80
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=4096 * 32)
    return {**f, **every_layer_window(r, 4096)}, cap


def mixtral(r):  # configuration_mixtral.py:72-83, router Linear(h, E) without bias
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=4096 * 32)
    return {**f, **every_layer_window(r), "num_experts": expert_count(r, "num_local_experts", 8),
            "top_k": r.get("num_experts_per_tok", 2)}, cap


def phi3(r):  # configuration_phi3.py:61-81; fused qkv_proj / gate_up_proj count the same
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=4096)
    return {**f, **every_layer_window(r)}, cap


def qwen2(r):  # configuration_qwen2.py:66-77; q/k/v carry biases, o does not
    f, cap = decoder(r, kv=32, head_dim=None, tied=False, maxpos=32768)
    return {**f, "qkv_bias": True, **qwen_window(r, f["layers"])}, cap


def qwen3(r):  # configuration_qwen3.py:62-80; q_norm/k_norm over head_dim
    f, cap = decoder(r, kv=32, head_dim=128, tied=False, maxpos=32768)
    return {**f, **bias(r), "qk_norm": "head", **qwen_window(r, f["layers"])}, cap


def qwen3_moe(r):  # configuration_qwen3_moe.py:81-105
    f, cap = decoder(r, kv=4, head_dim=None, tied=False, maxpos=32768)
    # transformers 5 writes the count as num_local_experts (configuration_qwen3_moe.py:51-53)
    e = expert_count(r, "num_experts", 128, dense_ok=True, alias="num_local_experts")
    moe = {"num_experts": e, "top_k": r.get("num_experts_per_tok", 8),
           "moe_ffn_hidden": r.get("moe_intermediate_size", 768),
           "moe_layer_ids": sparse_layers(r, f["layers"])} if e > 1 else {}
    return {**f, **bias(r), "qk_norm": "head", **moe, **_every_window_if_used(r)}, cap


def _every_window_if_used(r):
    """Qwen3-MoE: with use_sliding_window every layer slides (configuration_qwen3_moe.py:111
    keeps the window; the model masks every layer with it, modeling_qwen3_moe.py:148,
    :472); the class has no max_window_layers."""
    w = r.get("sliding_window", 4096, int, nullable=True)
    return {"sliding_window": w} if r.get("use_sliding_window", False, bool) and w else {}


def qwen2_moe(r):  # configuration_qwen2_moe.py:79-106; shared expert + sigmoid gate
    f, cap = decoder(r, kv=16, head_dim=None, tied=False, maxpos=32768)
    e = expert_count(r, "num_experts", 60, dense_ok=True)
    moe = {"num_experts": e, "top_k": r.get("num_experts_per_tok", 4),
           "moe_ffn_hidden": r.get("moe_intermediate_size", 1408), "shared_experts": 1,
           "shared_expert_ffn": r.get("shared_expert_intermediate_size", 5632),
           "shared_expert_gate": True,
           "moe_layer_ids": sparse_layers(r, f["layers"])} if e > 1 else {}
    return {**f, "qkv_bias": r.get("qkv_bias", True, bool), **moe,
            **qwen_window(r, f["layers"], alternate=True)}, cap


def gemma(r):  # configuration_gemma.py:72-84
    f, cap = decoder(r, kv=16, head_dim=256, tied=True, maxpos=8192)
    return {**f, **bias(r)}, cap


def gemma2(r):  # configuration_gemma2.py:68-97; four norms a layer
    f, cap = decoder(r, kv=4, head_dim=256, tied=True, maxpos=8192)
    return {**f, **bias(r), "layer_norms": 4, **softcaps(r, 50.0, 30.0),
            **alternating(r, f["layers"], 4096, 2)}, cap


def gemma3_text(r):  # configuration_gemma3.py:74-110; qk-norm, four norms, 5 local : 1
    r.refuse("use_bidirectional_attention", False, "a bidirectional encoder")
    f, cap = decoder(r, kv=4, head_dim=256, tied=True, maxpos=131_072)
    # configuration_gemma3.py:106 keeps the pattern as _sliding_window_pattern
    pattern = r.get("sliding_window_pattern", r.get("_sliding_window_pattern", 6))
    return {**f, **bias(r), "layer_norms": 4, "qk_norm": "head", **softcaps(r, None, None),
            **alternating(r, f["layers"], 4096, pattern)}, cap


def olmo2(r):  # configuration_olmo2.py:70-85; post-norms only, qk-norm over all heads
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    return {**f, **bias(r), "qk_norm": "full"}, cap


def starcoder2(r):  # configuration_starcoder2.py:61-81; LayerNorm, GELU MLP, biases
    f, cap = decoder(r, kv=2, head_dim=None, tied=True, maxpos=4096)
    b = r.get("use_bias", True, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "mlp_bias": b, "gated_mlp": False,
            "norm": "layernorm", **every_layer_window(r)}, cap


def gpt_oss(r):  # configuration_gpt_oss.py:50-85: every layer MoE, biases, sinks
    f, cap = decoder(r, kv=8, head_dim=64, tied=False, maxpos=131072)
    return {**f, **bias(r, default=True), "num_experts": expert_count(r, "num_local_experts", 128),
            "top_k": r.get("num_experts_per_tok", 4), "mlp_bias": True, "router_bias": True,
            "glu_clamp": r.get("swiglu_limit", 7.0, float),  # the experts' clamp
            "attention_sinks": True, **alternating(r, f["layers"], 128, 2),
            **yarn_mscale(r)}, cap  # as Megatron-Bridge sets it: gpt_oss_bridge.py L94-100 @ v0.4.0


def llama4_text(r):  # configuration_llama4.py:130-193
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=4096 * 32,
                      ffn_key="intermediate_size_mlp", ffn=16384)
    layers, step = f["layers"], r.get("interleave_moe_layer_step", 1)
    ids = r.get("moe_layers", list(range(step - 1, layers, step)), list)
    chunk = r.get("attention_chunk_size", 8192, int, nullable=True)
    interval = r.get("no_rope_layer_interval", 4)
    rope = r.get("no_rope_layers", None, list) or \
        [int((i + 1) % interval != 0) for i in range(layers)]  # 1 = rope = chunked
    local = r.layer_types(layers, [i for i, v in enumerate(rope) if v]) if chunk else None
    window = {"sliding_window": chunk, "local_layers": local,
              "local_attention": "chunked"} if local else {}
    return {**f, **bias(r), "num_experts": expert_count(r, "num_local_experts", 16),
            "top_k": r.get("num_experts_per_tok", 1),
            "moe_ffn_hidden": r.get("intermediate_size", 8192), "shared_experts": 1,
            "moe_layer_ids": tuple(sorted(set(ids))), **window}, cap


def _mla(r, *, experts, shared, moe, first_dense, top_k_default, maxpos):
    """DeepSeek-V2/V3 (modeling_deepseek_v3.py:371-404 attention, :205-215 MoE). The V3
    router's e_score_correction_bias is a buffer (modeling_deepseek_v3.py:131), not a
    parameter: updated by the balancing rule (V3 report sec. 2.1.2), not by the optimizer."""
    r.refuse("moe_layer_freq", 1, "transformers ignores it; DeepSeek's own code skips layers")
    r.refuse("mlp_bias", False, "biases on the dense and shared MLPs but not the experts")
    f, cap = mla(r, maxpos=maxpos)
    k = top_k(r, default=top_k_default)
    f.update(num_experts=expert_count(r, "n_routed_experts", experts), top_k=k,
             shared_experts=r.get("n_shared_experts", shared),
             moe_ffn_hidden=r.get("moe_intermediate_size", moe),
             first_dense_layers=r.get("first_k_dense_replace", first_dense))
    return f, cap


def deepseek_v2(r):  # configuration_deepseek_v2.py:76-120
    return _mla(r, experts=64, shared=2, moe=1407, first_dense=0, top_k_default=None, maxpos=2048)


def deepseek_v3(r):  # configuration_deepseek_v3.py:82-117; MTP key aliased at :79
    f, cap = _mla(r, experts=256, shared=1, moe=2048, first_dense=3, top_k_default=8, maxpos=4096)
    mtp = r.get("num_nextn_predict_layers", r.get("num_mtp_layers", 1))
    # node-limited routing: modeling_deepseek_v3.py L128-143 always routes by group
    groups = {"router_groups": r.get("n_group", 8), "router_group_topk": r.get("topk_group", 4)}
    return {**f, "mtp_layers": mtp, **groups}, cap


def gpt2(r):  # configuration_gpt2.py:78-103: learned positions, LayerNorm, biases, tied
    hidden = r.get("n_embd")
    positions = r.get("n_positions", 1024)
    f = {"layers": r.get("n_layer"), "hidden": hidden, "heads": r.get("n_head"),
         "vocab": r.get("vocab_size", 50257), "ffn_hidden": r.get("n_inner", 4 * hidden),
         "tied_embeddings": r.get("tie_word_embeddings", True, bool), "gated_mlp": False,
         "norm": "layernorm", "qkv_bias": True, "out_bias": True, "mlp_bias": True,
         "learned_positions": positions}
    return f, positions


def gpt_neox(r):  # configuration_gpt_neox.py:70-80; fused query_key_value, full MHA
    f = {"layers": r.get("num_hidden_layers"), "hidden": r.get("hidden_size"),
         "heads": r.get("num_attention_heads"), "vocab": r.get("vocab_size"),
         "ffn_hidden": r.get("intermediate_size"),
         "tied_embeddings": r.get("tie_word_embeddings", False, bool),
         **bias(r, default=True), "gated_mlp": False, "norm": "layernorm", "mlp_bias": True}
    return f, r.get("max_position_embeddings", 2048)


FIRST = {fn.__name__: fn for fn in (
    llama, mistral, mixtral, qwen2, gemma, gpt2, gpt_neox, qwen3, qwen3_moe, qwen2_moe,
    deepseek_v2, deepseek_v3, llama4_text, gemma2, gemma3_text, gpt_oss, phi3, olmo2,
    granite, starcoder2)}
FAMILIES = {**FIRST, **dense.FAMILIES, **layouts.FAMILIES, **moe.FAMILIES,
            **hybrids.FAMILIES, **kda.FAMILIES, **deepseek_v4.FAMILIES,
            **unmodelled.FAMILIES}  # every model_type the ledger reads
# remote-code model_types (no transformers class): their reader, the family counted as
REMOTE = {"minimax_m1": (hybrids.minimax_m1, "minimax")}
# composites whose text model the ledger reads (from their text_config)
COMPOSITES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "got_ocr2": "qwen2",
              "emu3": "emu3_text_model", "fuyu": "persimmon", "qwen3_5": "qwen3_5_text",
              "qwen3_5_moe": "qwen3_5_moe_text", "gemma4_unified": "gemma4_unified_text",
              "minimax_m3_vl": "minimax_m3_vl_text"}
# composites whose config class builds the text model as one class whatever its text_config's
# model_type says: Kimi-K2.5 / K2.6 (text model_type "kimi_k2" in K2.6's file) as DeepSeek-V3,
# vllm 0.22.0 vllm/transformers_utils/configs/kimi_k25.py:99-105 (DeepseekV3Config(**text_config))
TEXT_AS = {"kimi_k25": "deepseek_v3"}
