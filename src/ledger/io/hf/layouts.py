"""Decoders outside the Llama mould, family by family: the GPT-2 era's LayerNorm stacks with
learned (OPT, BioGPT: two offset rows), sinusoidal (XGLM, CTRL) or ALiBi (BLOOM, MPT)
positions, fused or multi-query attention (GPT-BigCode, Falcon, MPT), parallel attention
and MLP behind one norm (GPT-J, CodeGen, Phi, Falcon, Cohere), a bias on the output layer,
and the LayerNorm models of the 2020s (Persimmon, StableLM, Nemotron, Jais 2).

Readers as in ``ledger.io.hf.families``; counts held to transformers' in ``tests/test_corpus.py``.
"""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.io.hf.keys import bias, decoder, every, every_layer_window, windows

_GPT = {"gated_mlp": False, "norm": "layernorm", "qkv_bias": True, "out_bias": True,
        "mlp_bias": True}  # LayerNorm, a plain MLP, biases everywhere


def _gpt_keys(r, layers="n_layer", hidden="n_embd", heads="n_head", vocab=50257, ffn="n_inner",
              width=None):
    """The GPT-2-era shape keys; the MLP's width ``ffn`` defaults to ``width`` (the class's
    constant) or, null or absent with no constant, 4 x hidden."""
    h = r.get(hidden)
    return {"layers": r.get(layers), "hidden": h, "heads": r.get(heads),
            "vocab": r.get("vocab_size", vocab), "ffn_hidden": r.get(ffn, width or 4 * h)}


def gpt_neo(r):  # configuration_gpt_neo.py; modeling_gpt_neo.py:85 (q/k/v without bias)
    f = _gpt_keys(r, layers="num_layers", hidden="hidden_size", heads="num_heads",
                  ffn="intermediate_size")
    maxpos = r.get("max_position_embeddings", 2048)
    # configuration_gpt_neo.py:74-76 derives attention_layers from attention_types
    types = r.cfg.get("attention_types")
    kinds = _expand_types(types) if types is not None else \
        r.get("attention_layers", None, list_of=str) or \
        _expand_types([[["global", "local"], f["layers"] // 2]])
    r.ignore("attention_layers")
    if len(kinds) != f["layers"] or any(k not in ("global", "local") for k in kinds):
        raise LedgerError("config.json", f"'attention_layers' must list global or local for "
                                         f"each of num_layers({f['layers']}), got {kinds!r}")
    local = tuple(i for i, k in enumerate(kinds) if k == "local")
    window = {"sliding_window": r.get("window_size", 256), "local_layers": local} if local \
        else {}
    return {**f, **_GPT, "qkv_bias": False, "learned_positions": maxpos, **window,
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, maxpos


def _expand_types(spec) -> list:
    """GPT-Neo's attention_types, [[kinds, repeat], ...] (configuration_gpt_neo.py
    expand_attention_types_params), as one kind per layer."""
    try:
        return [kind for kinds, n in spec for _ in range(n) for kind in kinds]
    except (TypeError, ValueError):
        raise LedgerError("config.json", f"'attention_types' must be [[kinds, repeat], ...], "
                                         f"got {spec!r}") from None


def gptj(r):  # configuration_gptj.py; one LayerNorm before the parallel attention and MLP
    f = _gpt_keys(r, vocab=50400)
    return {**f, **_GPT, "qkv_bias": False, "out_bias": False, "layer_norms": 1,
            "lm_head_bias": True,  # modeling_gptj.py:577
            "tied_embeddings": r.get("tie_word_embeddings", False, bool)}, \
        r.get("n_positions", 2048)


def codegen(r):  # configuration_codegen.py; GPT-J's layout, q/k/v fused (modeling :85)
    return gptj(r)


def bloom(r):  # configuration_bloom.py; ALiBi, fused qkv, embedding LayerNorm
    h = r.get("hidden_size")
    f = {"layers": r.get("n_layer"), "hidden": h, "heads": r.get("n_head"),
         "vocab": r.get("vocab_size", 250880), "ffn_hidden": 4 * h}
    return {**f, **_GPT, "embedding_norm": True,  # modeling_bloom.py:425
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, 2048


def _learned_with_offset(r, maxpos: int) -> int:
    """OPT and BioGPT's learned positions keep two extra rows (``self.offset = 2``,
    modeling_opt.py:53, modeling_biogpt.py:59)."""
    return r.get("max_position_embeddings", maxpos) + 2


def opt(r):  # configuration_opt.py; modeling_opt.py
    r.refuse("_remove_final_layer_norm", False, "OPT-350m's checkpoint layout")
    h = r.get("hidden_size")
    proj = r.get("word_embed_proj_dim", h)
    if proj != h:
        raise LedgerError("config.json", f"'word_embed_proj_dim' = {proj} != hidden_size({h}) "
                                         f"adds project_in/out layers the ledger does not "
                                         f"count (OPT-350m)")
    b = r.get("enable_bias", True, bool)
    f = {"layers": r.get("num_hidden_layers"), "hidden": h,
         "heads": r.get("num_attention_heads"), "vocab": r.get("vocab_size", 50272),
         "ffn_hidden": r.get("ffn_dim")}
    positions = _learned_with_offset(r, 2048)
    return {**f, **_GPT, "qkv_bias": b, "out_bias": b, "mlp_bias": b,
            "learned_positions": positions,
            "norm_weights": r.get("layer_norm_elementwise_affine", True, bool),
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, positions - 2


def biogpt(r):  # configuration_biogpt.py
    f = _gpt_keys(r, layers="num_hidden_layers", hidden="hidden_size",
                  heads="num_attention_heads", vocab=42384, ffn="intermediate_size",
                  width=4096)
    positions = _learned_with_offset(r, 1024)
    return {**f, **_GPT, "learned_positions": positions,
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, positions - 2


def xglm(r):  # configuration_xglm.py; sinusoidal positions (no parameters)
    f = _gpt_keys(r, layers="num_layers", hidden="d_model", heads="attention_heads",
                  vocab=256008, ffn="ffn_dim", width=4096)
    return {**f, **_GPT, "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, \
        r.get("max_position_embeddings", 2048)


def openai_gpt(r):  # configuration_openai.py; post-LN GPT-1 without a final norm
    f = _gpt_keys(r, vocab=40478)
    positions = r.get("n_positions", 512)
    return {**f, **_GPT, "learned_positions": positions, "final_norm": False,
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, positions


def ctrl(r):  # configuration_ctrl.py; sinusoidal positions, tied head with its own bias
    f = _gpt_keys(r, vocab=246534, ffn="dff", width=8192)
    return {**f, **_GPT, "lm_head_bias": True,  # modeling_ctrl.py:352
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, \
        r.get("n_positions", 256)


def gpt_bigcode(r):  # configuration_gpt_bigcode.py; multi-query: one K/V head
    f = _gpt_keys(r)
    positions = r.get("n_positions", 1024)
    return {**f, **_GPT, "kv_heads": 1 if r.get("multi_query", True, bool) else f["heads"],
            "learned_positions": positions,
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, positions


def falcon(r):  # configuration_falcon.py; modeling_falcon.py:230-241, 548-566
    h, heads = r.get("hidden_size"), r.get("num_attention_heads")
    new = r.get("new_decoder_architecture", False, bool)
    parallel = r.get("parallel_attn", True, bool)
    kv = r.get("num_kv_heads", heads) if new else 1 if r.get("multi_query", True, bool) \
        else heads
    norms = 2 if not parallel else r.get("num_ln_in_parallel_attn", 2 if new else 1)
    if norms not in (1, 2):
        raise LedgerError("config.json", f"'num_ln_in_parallel_attn' = {norms}: 1 or 2")
    b = r.get("bias", False, bool)
    f = {"layers": r.get("num_hidden_layers"), "hidden": h, "heads": heads,
         "kv_heads": kv, "vocab": r.get("vocab_size", 65024),
         "ffn_hidden": r.get("ffn_hidden_size", 4 * h)}
    return {**f, **_GPT, "qkv_bias": b, "out_bias": b, "mlp_bias": b, "layer_norms": norms,
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, \
        r.get("max_position_embeddings", 2048)


def mpt(r):  # configuration_mpt.py; ALiBi, fused Wqkv, bias-free LayerNorms (no_bias)
    attn = r.sub("attn_config")
    if attn.get("qk_ln") or attn.get("attn_type", "multihead_attention") != \
            "multihead_attention":
        raise LedgerError("config.json", "attn_config qk_ln / a non-multihead attn_type is "
                                         "not modelled for model_type 'mpt'")
    h = r.get("d_model")
    ratio = r.get("expansion_ratio", 4)
    if ratio != 4:  # modeling_mpt.py:142 builds 4 x d_model whatever the ratio says
        r.notes.append(f"expansion_ratio {ratio} is ignored: transformers' MPT builds an MLP "
                       f"of 4 x d_model, so does the ledger")
    if not r.get("no_bias", True, bool):  # modeling_mpt.py:82-172 builds no bias either way
        r.notes.append("no_bias = false is ignored: transformers' MPT builds no biases and "
                       "norms without one, so does the ledger")
    f = {"layers": r.get("n_layers"), "hidden": h, "heads": r.get("n_heads"),
         "vocab": r.get("vocab_size", 50368), "ffn_hidden": 4 * h}
    return {**f, "gated_mlp": False, "norm": "rmsnorm",  # a LayerNorm's weight alone
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, \
        r.get("max_seq_len", 2048)


def phi(r):  # configuration_phi.py; one LayerNorm, parallel block, biases, lm_head bias
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    qk = "head" if r.get("qk_layernorm", False, bool) else "none"  # LayerNorm over head_dim
    return {**f, **_GPT, "layer_norms": 1, "lm_head_bias": True, "qk_norm": qk}, cap


def persimmon(r):  # configuration_persimmon.py; fused qkv, LayerNorm qk-norm, ReLU^2 MLP
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=16384)
    qk = "head" if r.get("qk_layernorm", True, bool) else "none"
    return {**f, **_GPT, "kv_heads": f["heads"], "qk_norm": qk}, cap


def stablelm(r):  # configuration_stablelm.py; LayerNorm + SwiGLU
    r.refuse("qk_layernorm", False, "per-head LayerNorms without bias on a LayerNorm model")
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=4096)
    norms = 1 if r.get("use_parallel_residual", False, bool) else 2
    return {**f, "norm": "layernorm", "qkv_bias": r.get("use_qkv_bias", False, bool),
            "layer_norms": norms}, cap


def nemotron(r):  # configuration_nemotron.py; LayerNorm1P (weight and bias), ReLU^2 MLP
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=4096)
    return {**f, **bias(r), "mlp_bias": r.get("mlp_bias", False, bool), "gated_mlp": False,
            "norm": "layernorm"}, cap


def jais2(r):  # configuration_jais2.py; LayerNorm, biases, a plain ReLU^2 MLP
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=8192)
    return {**f, **bias(r, default=True), "mlp_bias": r.get("mlp_bias", True, bool),
            "gated_mlp": False, "norm": "layernorm"}, cap


def cohere(r, head_dim=None):  # configuration_cohere.py; one weight-only LayerNorm, parallel
    f, cap = decoder(r, kv=None, head_dim=head_dim, tied=True, maxpos=8192)
    qk = "full" if r.get("use_qk_norm", False, bool) else "none"  # LayerNorm over (heads, d)
    return {**f, **bias(r), "layer_norms": 1, "qk_norm": qk}, cap


def cohere2(r, head_dim=None):  # configuration_cohere2.py; cohere with 3 sliding : 1 global
    f, cap = cohere(r, head_dim)
    pattern = r.get("sliding_window_pattern", 4)
    return {**f, **windows(r, f["layers"], 4096, every(f["layers"], pattern))}, cap


def cohere_compass_text(r):  # configuration_cohere_compass.py; Cohere 2's text stack
    return cohere2(r)


def moshi(r):  # configuration_moshi.py; modeling_moshi.py:352-360 fc1 = gate and up
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=3000, ffn_key="ffn_dim")
    width = f["ffn_hidden"] // 2
    return {**f, "ffn_hidden": width, **bias(r), "embedding_rows": f["vocab"] + 1,  # :586
            **every_layer_window(r, 3000)}, cap


FAMILIES = {fn.__name__: fn for fn in (
    gpt_neo, gptj, codegen, bloom, opt, biogpt, xglm, ctrl, gpt_bigcode, falcon, mpt, phi,
    persimmon, stablelm, nemotron, jais2, cohere, cohere2, cohere_compass_text, moshi)} \
    | {"openai-gpt": openai_gpt}
