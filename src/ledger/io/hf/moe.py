"""Mixtures of experts and latent attention beyond DeepSeek and Qwen, family by family:
config.json keys -> ModelSpec fields, as in ``ledger.io.hf.families``.

Routed experts are counted per layer as transformers 5 builds them (fused [E, 2f, h] and
[E, h, f] tensors; DBRX's [E f, h]); a shared expert is one MLP of its own width; a
router's correction bias counts as ``router_bias`` where it is a parameter (ERNIE 4.5,
AFMoE, Laguna) and not where it is a buffer (DeepSeek-V3, GLM-4.5, dots1, MiniMax). Counts
are held to transformers' own in ``tests/test_corpus.py``.
"""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.anatomy.mixers import GlobalAttention
from ledger.io.hf.keys import (bias, decoder, every, every_layer_window, expert_count, mla,
                            mlp_types, softcaps, sparse_ids, sparse_layers, top_k, windows)


def _moe(r, experts_key, experts, width_key, width, k_key="num_experts_per_tok", k=None):
    """Routed experts: how many, of which width, top-k."""
    return {"num_experts": expert_count(r, experts_key, experts),
            "top_k": top_k(r, k_key, k), "moe_ffn_hidden": r.get(width_key, width)}


def _shared(width: int) -> dict:
    return {"shared_experts": 1, "shared_expert_ffn": width} if width else {}


def granitemoe(r):  # configuration_granitemoe.py; Mixtral's MoE, intermediate_size per expert
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    return {**f, **bias(r), **_moe(r, "num_local_experts", 8, "intermediate_size", None,
                                   k=2)}, cap


def granitemoeshared(r):  # configuration_granitemoeshared.py; + a shared MLP (0: none)
    f, cap = granitemoe(r)
    return {**f, **_shared(r.get("shared_intermediate_size", 0))}, cap


def granitemoe_swa(r):  # configuration_granitemoe_swa.py; + sinks and 3 sliding : 1 global
    f, cap = granitemoeshared(r)
    return {**f, "attention_sinks": True,
            **windows(r, f["layers"], 128, every(f["layers"], 4))}, cap


def granite_swa(r):  # configuration_granite_swa.py; Granite with sinks and local layers
    f, cap = decoder(r, kv=4, head_dim=None, tied=True, maxpos=8192)
    return {**f, **bias(r), "mlp_bias": r.get("mlp_bias", False, bool),
            "attention_sinks": True, **windows(r, f["layers"], 128, every(f["layers"], 4))}, cap


def phimoe(r):  # configuration_phimoe.py; LayerNorm, Mixtral's MoE, an optional head bias
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=131072)
    return {**f, **bias(r), "norm": "layernorm",
            "lm_head_bias": r.get("lm_head_bias", False, bool),  # modeling_phimoe.py:749
            **_moe(r, "num_local_experts", 16, "intermediate_size", None, k=2),
            **every_layer_window(r)}, cap


def olmoe(r):  # configuration_olmoe.py; OLMo 2's full qk-norm, pre-norm, experts only
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=4096)
    return {**f, **bias(r), "qk_norm": "full",
            **_moe(r, "num_experts", 64, "intermediate_size", None, k=8)}, cap


def flex_olmo(r):  # configuration_flex_olmo.py; OLMo 2's post-norms + experts
    f, cap = olmoe(r)
    return {**f, **_moe(r, "num_experts", 7, "intermediate_size", None, k=5)}, cap


def minimax_m2(r):  # configuration_minimax_m2.py; full-width qk-norm, experts only
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=196608)
    # MiniMax-M2's files keep M1's attn_type_list (1 softmax, 0 lightning: MiniMax-M1's
    # modeling_minimax_m1.py), all 1: every layer softmax attention, which is all
    # MiniMaxM2 builds (transformers ignores the key). A lightning layer is refused.
    kinds = r.get("attn_type_list", None, list_of=int)
    if kinds is not None and (len(kinds) != f["layers"] or set(kinds) - {1}):
        raise LedgerError("config.json", f"'attn_type_list' {kinds!r} asks for lightning "
                                         f"(0) layers or another depth than num_hidden_layers"
                                         f"({f['layers']}); model_type 'minimax_m2' builds "
                                         f"softmax attention (1) on every layer")
    return {**f, "qk_norm": "full",
            **_moe(r, "num_local_experts", 256, "intermediate_size", None, k=8)}, cap


def minimax_m3_vl_text(r):  # configuration_minimax_m3_vl.py; + a shared expert, dense layers
    """MiniMax-M3's text model. Its released keys are read as the config class's
    __post_init__ reads them (transformers 5.23.0, configuration_minimax_m3_vl.py L120-152):
    ``moe_layer_freq`` (1 a MoE layer, 0 dense) where ``mlp_layer_types`` is absent, and
    ``sparse_attention_config.sparse_attention_freq`` where ``layer_types`` is - whose
    sparse layers each build a lightning indexer (modeling_minimax_m3_vl.py L417, L535-538:
    q/k projections and two norms), which the ledger does not count: refused, naming it."""
    f, cap = decoder(r, kv=4, head_dim=128, tied=False, maxpos=524288,
                     ffn_key="dense_intermediate_size")
    freq = r.get("moe_layer_freq", None, list_of=int)
    default = ["sparse" if x else "dense" for x in freq] if freq is not None \
        else ["sparse"] * f["layers"]
    ids = sparse_ids(mlp_types(r, f["layers"], default))
    sparse = r.sub("sparse_attention_config")
    kinds = r.get("layer_types", None, list_of=str) or [
        "minimax_m3_sparse" if x else "full_attention"
        for x in sparse.get("sparse_attention_freq") or []]
    if "minimax_m3_sparse" in kinds:
        raise LedgerError("config.json", f"{kinds.count('minimax_m3_sparse')} sparse "
                                         f"attention layers (sparse_attention_config / "
                                         f"layer_types 'minimax_m3_sparse') each build "
                                         f"MiniMax-M3's lightning indexer, which the ledger "
                                         f"does not count")
    return {**f, "qk_norm": "head", "moe_layer_ids": ids,
            **_moe(r, "num_local_experts", 128, "intermediate_size", 3072, k=4),
            **_shared(r.get("shared_intermediate_size", 3072))}, cap


def aria_text(r):  # configuration_aria.py; intermediate_size per expert, shared x it
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    n = r.get("moe_num_shared_experts", 2)
    return {**f, **bias(r), **_moe(r, "moe_num_experts", 8, "intermediate_size", None,
                                   k_key="moe_topk", k=2),
            **_shared(n * f["ffn_hidden"])}, cap


def cohere2_moe(r):  # configuration_cohere2_moe.py; modeling_cohere2_moe.py:170-178, :351
    from ledger.io.hf.layouts import cohere2

    f, cap = cohere2(r, head_dim=128)
    if r.cfg.get("layer_types") is not None:  # it fixes every layer: the prefix pattern is
        r.ignore("prefix_dense_sliding_window_pattern")  # read only without it (:143-153)
    types = mlp_types(r, f["layers"], ["sparse"] * f["layers"])
    dense = r.get("prefix_dense_intermediate_size", None) if "dense" in types else None
    if "dense" in types and dense is None:
        raise LedgerError("config.json", "dense mlp_layer_types need "
                                         "'prefix_dense_intermediate_size'")
    moe = _moe(r, "num_experts", 8, "intermediate_size", None, k=2)
    return {**f, **moe, "ffn_hidden": dense or f["ffn_hidden"], "moe_layer_ids": sparse_ids(
        types), **_shared(r.get("num_shared_experts", 0) * moe["moe_ffn_hidden"])}, cap


def dbrx(r):  # configuration_dbrx.py; nested attn_config / ffn_config, fused Wqkv
    attn, ffn = r.sub("attn_config"), r.sub("ffn_config")
    h = r.get("d_model")
    sub = type(r)(ffn, r.kind)  # the nested keys, type-checked and named the same way
    f = {"layers": r.get("n_layers"), "hidden": h, "heads": r.get("n_heads"),
         "kv_heads": type(r)(attn, r.kind).get("kv_n_heads", 1),
         "vocab": r.get("vocab_size", 32000), "ffn_hidden": sub.get("ffn_hidden_size", 3584),
         "tied_embeddings": r.get("tie_word_embeddings", False, bool)}
    return {**f, "num_experts": expert_count(sub, "moe_num_experts", 4),
            "top_k": sub.get("moe_top_k", 1)}, r.get("max_seq_len", 2048)


def _first_dense(r, layers: int, key="first_k_dense_replace", default=0) -> dict:
    types = r.get("mlp_layer_types", None, list_of=str)
    if types is not None:
        return {"moe_layer_ids": sparse_ids(mlp_types(r, layers, types))}
    return {"first_dense_layers": r.get(key, default)}


def _deepseek_moe(r, layers, *, experts, shared, width, first_dense, k=None, groups=True):
    """DeepSeek's MoE keys (n_routed_experts, n_shared_experts x moe_intermediate_size,
    first_k_dense_replace or mlp_layer_types; n_group / topk_group routing)."""
    moe = _moe(r, "n_routed_experts", experts, "moe_intermediate_size", width, k=k)
    out = {**moe, "shared_experts": top_k(r, "n_shared_experts", shared),
           **_first_dense(r, layers, default=first_dense)}
    if groups and r.get("n_group", 1) > 1:
        out |= {"router_groups": r.get("n_group"), "router_group_topk": r.get("topk_group", 1)}
    return out


def dots1(r):  # configuration_dots1.py; GQA + head qk-norm, DeepSeek's MoE
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    return {**f, **bias(r), "qk_norm": "head", **windows(r, f["layers"]),
            **_deepseek_moe(r, f["layers"], experts=None, shared=None, width=1408,
                            first_dense=0)}, cap


def glm4_moe(r):  # configuration_glm4_moe.py; the MTP layer (num_nextn_predict_layers) is
    # DeepSeek-V3's (GLM-4.5 report, arXiv:2508.06471 sec. 2.1); transformers does not build it
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=131072)
    qk = "head" if r.get("use_qk_norm", False, bool) else "none"
    return {**f, "qkv_bias": r.get("attention_bias", False, bool), "qk_norm": qk,
            "mtp_layers": r.get("num_nextn_predict_layers", 0),
            **_deepseek_moe(r, f["layers"], experts=128, shared=1, width=1408,
                            first_dense=1, k=8)}, cap


def solar_open(r):  # configuration_solar_open.py; GLM-4.5's MoE, every layer
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=131072, ffn_key="moe_"
                     "intermediate_size")
    return {**f, **bias(r), **_deepseek_moe(r, f["layers"], experts=128, shared=1,
                                            width=1280, first_dense=0, k=8)}, cap


def hy_v3(r):  # configuration_hy_v3.py; head qk-norm, mlp_layer_types, a shared expert
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=131072)
    moe = _moe(r, "num_experts", 192, "moe_intermediate_size", 1536, k=8)
    ids = sparse_ids(mlp_types(r, f["layers"], ["dense"] + ["sparse"] * (f["layers"] - 1)))
    return {**f, **bias(r), "qk_norm": "head", **moe, "moe_layer_ids": ids,
            "shared_experts": r.get("num_shared_experts", 1)}, cap


def exaone_moe(r):  # configuration_exaone_moe.py; EXAONE 4's attention, DeepSeek-like MoE
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    moe = _moe(r, "num_experts", 64, "moe_intermediate_size", 1024, k=8)
    pattern = r.get("sliding_window_pattern", 4)
    return {**f, "qk_norm": "head", **moe, "shared_experts": r.get("num_shared_experts", 1),
            **_first_dense(r, f["layers"], default=1),
            **windows(r, f["layers"], 4096, every(f["layers"], pattern))}, cap


def ernie4_5_moe(r):  # configuration_ernie4_5_moe.py; modeling_ernie4_5_moe.py:397-399
    r.refuse("use_bias", False, "biases on the dense and shared MLPs but not the experts")
    f, cap = decoder(r, kv=4, head_dim=None, tied=True, maxpos=131072)
    moe = _moe(r, "moe_num_experts", 64, "moe_intermediate_size", 1536, k_key="moe_k", k=6)
    start, end = r.get("moe_layer_start_index", 1), r.get("moe_layer_end_index", -1)
    end = f["layers"] - 1 if end < 0 else end
    step = r.get("moe_layer_interval", 1)
    ids = tuple(i for i in range(f["layers"]) if (i + 1) % step == 0 and start <= i <= end)
    n = r.get("moe_num_shared_experts", 2)
    return {**f, **moe, "moe_layer_ids": ids, "router_bias": True,  # moe_statics, a parameter
            **_shared(n * moe["moe_ffn_hidden"])}, cap


def mellum(r):  # configuration_mellum.py; Qwen3-MoE shape, mlp_layer_types, layer_types
    f, cap = decoder(r, kv=4, head_dim=128, tied=False, maxpos=131072)
    ids = sparse_ids(mlp_types(r, f["layers"], ["sparse"] * f["layers"]))
    return {**f, **bias(r), "qk_norm": "head", "moe_layer_ids": ids,
            **_moe(r, "num_local_experts", 64, "moe_intermediate_size", 896, k=8),
            **windows(r, f["layers"])}, cap


def flint(r):  # configuration_flint.py; sinks, head qk-norm, an ungated shared expert
    f, cap = decoder(r, kv=4, head_dim=128, tied=False, maxpos=262144)
    return {**f, **bias(r), "qk_norm": "head", "attention_sinks": True,
            **_moe(r, "num_experts", 256, "moe_intermediate_size", 512, k=6),
            "moe_layer_ids": sparse_layers(r, f["layers"], dense=[0, 1]),
            **_shared(r.get("shared_expert_intermediate_size", 1024)),
            **windows(r, f["layers"], 513, [i for i in range(f["layers"]) if not (  # its class's
                i < 2 or i % 4 == 1 or i == f["layers"] - 1)])}, cap  # rule, :105-108


def kolibri1(r):  # configuration_kolibri1.py; four norms, head qk-norm, a shared expert
    f, cap = decoder(r, kv=4, head_dim=128, tied=False, maxpos=262144, ffn_key=
                     "moe_intermediate_size")
    return {**f, "qk_norm": "head", "layer_norms": 4,
            **_moe(r, "num_local_experts", 384, "moe_intermediate_size", 512, k=6),
            **_shared(r.get("shared_expert_intermediate_size", 512)),
            # configuration_kolibri1.py:85 window 513, :99-103 every fifth layer global
            **windows(r, f["layers"], 513, every(f["layers"], 5))}, cap


def hunyuan_v1_moe(r):  # configuration_hunyuan_v1_moe.py; modeling :229-289
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    k = r.cfg.get("moe_topk", 1)
    if isinstance(k, list):  # one per layer
        if len(set(k)) != 1:
            raise LedgerError("config.json", f"'moe_topk' = {k!r} differs by layer; the "
                                             f"ledger's experts per token are one number")
        k = k[0]
    if isinstance(k, bool) or not isinstance(k, int):
        raise LedgerError("config.json", f"'moe_topk' must be an integer, got {k!r}")
    return {**f, **bias(r), "qk_norm": "head", "top_k": k, **_shared(f["ffn_hidden"]),
            "num_experts": expert_count(r, "num_experts", 1)}, cap


def afmoe(r):  # configuration_afmoe.py; modeling_afmoe.py:117,211 gate_proj, expert_bias
    f, cap = decoder(r, kv=None, head_dim=128, tied=False, maxpos=16384)
    moe = _moe(r, "num_experts", 64, "moe_intermediate_size", 1408, k=6)
    every_n = r.get("global_attn_every_n_layers", 4)
    return {**f, **bias(r), "qk_norm": "head", "layer_norms": 4, "attn_gate": "elementwise",
            **moe, "first_dense_layers": r.get("num_dense_layers", 1), "router_bias": True,
            **_shared(r.get("num_shared_experts", 2) * moe["moe_ffn_hidden"]),
            **windows(r, f["layers"], 1024, every(f["layers"], every_n))}, cap


def beam(r):  # configuration_beam.py; modeling_beam.py:231-233 gate_proj + gate_bias
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=8192)
    moe = _moe(r, "num_experts", 256, "moe_intermediate_size", 2560, k=8)
    groups = {"router_groups": r.get("n_group", 1), "router_group_topk":
              r.get("topk_group", 1)} if r.get("n_group", 1) > 1 else {}
    return {**f, **bias(r), "qk_norm": "head", "layer_norms": 4, "attn_gate": "elementwise",
            "attn_gate_bias": True, **moe, **groups, **softcaps(r, None, 30.0),
            "moe_layer_ids": sparse_ids(mlp_types(r, f["layers"], ["dense"] * min(3, f["layers"])
                                                  + ["sparse"] * (f["layers"] - 3))),
            **windows(r, f["layers"], 512, every(f["layers"], 6))}, cap  # its class: :113-123


def _laguna_gate(gating) -> str:
    """Laguna's output gate (modeling_laguna.py:354-356): per head when ``gating`` is true
    or "per-head", per channel otherwise - always there."""
    if not isinstance(gating, (bool, str)):
        raise LedgerError("config.json", f"'gating' must be true, false or a string, got "
                                         f"{gating!r}")
    return "head" if gating is True or gating == "per-head" else "elementwise"


def laguna(r):  # configuration_laguna.py; modeling_laguna.py:154,356 per-head g_proj
    f, cap = decoder(r, kv=8, head_dim=128, tied=False, maxpos=131072)
    per = r.get("num_attention_heads_per_layer", None, list_of=int)
    if per is not None and set(per) != {f["heads"]}:
        raise LedgerError("config.json", f"'num_attention_heads_per_layer' = {per!r}: heads "
                                         f"that differ by layer are not modelled")
    moe = _moe(r, "num_experts", 256, "moe_intermediate_size", 512, k=8)
    return {**f, **bias(r), "qk_norm": "head",
            "attn_gate": _laguna_gate(r.cfg.get("gating", True)), **moe,
            "router_bias": True, **_shared(r.get("shared_expert_intermediate_size", 512)),
            "moe_layer_ids": sparse_ids(mlp_types(r, f["layers"], ["dense"] + ["sparse"] * (
                f["layers"] - 1))),
            **windows(r, f["layers"])}, cap


def _mla_moe(r, *, maxpos, experts, shared, width, first_dense, k, **mla_defaults):
    f, cap = mla(r, maxpos=maxpos, **mla_defaults)
    r.refuse("mlp_bias", False, "biases on the dense and shared MLPs but not the experts")
    # DeepSeek-V3.2's file carries moe_layer_freq 1 as V3's does (families._mla)
    r.refuse("moe_layer_freq", 1, "transformers ignores it; DeepSeek's own code skips layers")
    return {**f, **_deepseek_moe(r, f["layers"], experts=experts, shared=shared,
                                 width=width, first_dense=first_dense, k=k)}, cap


def glm4_moe_lite(r):  # configuration_glm4_moe_lite.py; MLA + DeepSeek's MoE
    return _mla_moe(r, maxpos=202752, experts=64, shared=1, width=1536, first_dense=1, k=4,
                    q_lora=768, nope=192, v=256)


def axk1(r):  # configuration_axk1.py; DeepSeek-V3 with a norm after each MoE block
    f, cap = _mla_moe(r, maxpos=32768, experts=192, shared=1, width=2048, first_dense=1,
                      k=8)
    return {**f, "moe_norm": True}, cap  # modeling_axk1.py:216 post_mlp_layernorm


def _indexed_everywhere(r) -> None:
    """DeepSeek-V3.2 / GLM-5: every layer is DSA (configuration_deepseek_v32.py:138-139);
    a layer_types naming anything else is a layout the ledger does not read."""
    types = r.get("layer_types", None, list_of=str)
    if types is not None and set(types) != {"indexed_attention"}:
        raise LedgerError("config.json", f"'layer_types' {sorted(set(types))}: only "
                                         f"indexed_attention on every layer is modelled")


def deepseek_v32(r):  # configuration_deepseek_v32.py; modeling_deepseek_v32.py:175 indexer
    _indexed_everywhere(r)
    f, cap = _mla_moe(r, maxpos=163840, experts=256, shared=1, width=2048, first_dense=3,
                      k=8)
    return {**f, "index_heads": r.get("index_n_heads", 64),
            "index_head_dim": r.get("index_head_dim", 128),
            "index_topk": r.get("index_topk", 2048)}, cap


def glm_moe_dsa(r):  # configuration_glm_moe_dsa.py; GLM-5: DeepSeek-V3.2's layout
    kinds = r.get("indexer_types", None, list_of=str)
    if kinds is not None and set(kinds) != {"full"}:
        raise LedgerError("config.json", f"'indexer_types' {sorted(set(kinds))}: indexers "
                                         f"shared between layers are not modelled")
    _indexed_everywhere(r)
    f, cap = _mla_moe(r, maxpos=202752, experts=256, shared=1, width=2048, first_dense=3,
                      k=8, q_lora=2048, nope=192, v=256)
    return {**f, "index_heads": r.get("index_n_heads", 32),
            "index_head_dim": r.get("index_head_dim", 128),
            "index_topk": r.get("index_topk", 2048)}, cap


def minicpm3(r):  # configuration_minicpm3.py; MLA with a dense MLP; muP scales no weights
    f, cap = mla(r, maxpos=32768, q_lora=768, kv_lora=256, rope=32, nope=64, v=64,
                 tied=True)
    return {**f, "mlp_bias": r.get("mlp_bias", False, bool)}, cap


def youtu(r):  # configuration_youtu.py; MLA with a dense MLP, tied
    return mla(r, maxpos=131072, tied=True)


def mimo_v2_flash(r):  # configuration_mimo_v2_flash.py; modeling_mimo_v2_flash.py:339-360
    f, cap = decoder(r, kv=4, head_dim=192, tied=False, maxpos=131072)
    types = mlp_types(r, f["layers"], ["dense"] + ["sparse"] * (f["layers"] - 1))
    kv = f["kv_heads"]  # the full-attention layers'; the sliding ones double it, with sinks
    return {**f, **bias(r), "kv_heads": 2 * kv, "attention_sinks": True,
            "v_head_dim": r.get("v_head_dim", 128),
            "global_attention": GlobalAttention(kv_heads=kv, sinks=False),
            **_deepseek_moe(r, f["layers"], experts=256, shared=0, width=2048, first_dense=1,
                            k=8), "moe_layer_ids": sparse_ids(types),
            **windows(r, f["layers"], 129, [i for i in range(1, f["layers"]) if (i + 1) % 6])}, cap


FAMILIES = {fn.__name__: fn for fn in (
    granitemoe, granitemoeshared, granitemoe_swa, granite_swa, phimoe, olmoe, flex_olmo,
    minimax_m2, minimax_m3_vl_text, aria_text, cohere2_moe, dbrx, dots1, glm4_moe,
    solar_open, hy_v3, exaone_moe, ernie4_5_moe, mellum, flint, kolibri1, hunyuan_v1_moe,
    afmoe, beam, laguna, glm4_moe_lite, axk1, deepseek_v32, glm_moe_dsa, minicpm3, youtu,
    mimo_v2_flash)}
