"""Kimi Delta Attention hybrids (Kimi Linear, Bailing hybrid): which layers run KDA and
which MLA, and their MoE keys. Readers as in ``ledger.io.hf.families``; split from
``ledger.io.hf.hybrids``, whose layer-type helpers they use; counts held to transformers'
in ``tests/test_corpus.py`` and, for Kimi-Linear-48B-A3B's released file, in
``tests/test_released.py``.
"""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.anatomy.mixers import LinearAttention
from ledger.io.hf.hybrids import _mixers, _types
from ledger.io.hf.keys import expert_count, mla, mlp_types, sparse_ids, top_k


def _kda(r, full_rank=False, sub: dict | None = None) -> dict:
    """Kimi Delta Attention's sizes; ``sub`` is the checkpoint's linear_attn_config, whose
    entries win over the top-level keys (configuration_kimi_linear.py:122-126)."""
    sub = sub or {}
    heads = _sub_int(sub, "num_heads", r.get("linear_num_heads", 32))
    dim = _sub_int(sub, "head_dim", r.get("linear_head_dim", 128))
    conv = _sub_int(sub, "short_conv_kernel_size", r.get("linear_conv_kernel_dim", 4))
    return {"linear": LinearAttention(kind="kda", key_heads=heads, key_dim=dim,
                                      value_heads=heads, value_dim=dim, conv_kernel=conv,
                                      full_rank_gates=full_rank)}


def _sub_int(sub: dict, key: str, default: int) -> int:
    value = sub.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LedgerError("config.json", f"'linear_attn_config.{key}' must be a positive "
                                         f"integer, got {value!r}")
    return value


def _kimi_linear_types(r, layers: int, sub: dict) -> list[str]:
    """Kimi Linear's layer types: layer_types, else the checkpoint's 1-indexed
    linear_attn_config full_attn_layers / kda_layers, else every 4th layer from the
    fifth full attention (configuration_kimi_linear.py:128-140)."""
    default = ["full_attention" if i and i % 4 == 0 else "linear_attention"
               for i in range(layers)]
    if "full_attn_layers" in sub and "kda_layers" in sub:
        default = [None] * layers
        for key, kind in (("full_attn_layers", "full_attention"),
                          ("kda_layers", "linear_attention")):
            ids = sub[key]
            if not isinstance(ids, list) or not all(isinstance(i, int) and 1 <= i <= layers
                                                    for i in ids):
                raise LedgerError("config.json", f"'linear_attn_config.{key}' must list layers "
                                                 f"1..{layers}, got {ids!r}")
            for i in ids:
                default[i - 1] = kind
        if None in default:
            raise LedgerError("config.json", f"linear_attn_config names no type for layer "
                                             f"{default.index(None) + 1} of {layers}")
    return _types(r, layers, default)


def _kda_moe(r, layers: int, k_default: int, width: int, dense: int, experts: int) -> dict:
    """The MoE keys of Kimi Linear and Bailing: mlp_layer_types, else ``dense`` leading
    dense layers (first_k_dense_replace)."""
    types = mlp_types(r, layers, ["dense" if i < dense else "sparse" for i in range(layers)])
    return {"num_experts": expert_count(r, "num_experts", experts),
            "top_k": top_k(r, "num_experts_per_token", k_default),
            "moe_ffn_hidden": r.get("moe_intermediate_size", width),
            "shared_experts": r.get("num_shared_experts", 1),
            "moe_layer_ids": sparse_ids(types)}


def kimi_linear(r):  # configuration_kimi_linear.py:129-146; modeling_kimi_linear.py:569-604
    f, cap = mla(r, maxpos=r.get("model_max_length", 1048576), q_lora=None, rope=64,
                 nope=128, v=128)
    layers = f["layers"]
    sub = r.get("linear_attn_config", None, dict, nullable=True) or {}
    types = _kimi_linear_types(r, layers, sub)
    # modeling_kimi.py (the remote code) puts experts on layer i >= first_k_dense_replace
    # with i % moe_layer_freq == 0; transformers ignores the key, so only 1 reads alike
    r.refuse("moe_layer_freq", 1, "transformers ignores it; Kimi's own code skips layers")
    return {**f, **_kda(r, sub=sub),
            **_kda_moe(r, layers, 8, 1024, r.get("first_k_dense_replace", 1), 256),
            "mixers": _mixers(types, "linear")}, cap


def bailing_hybrid(r):  # configuration_bailing_hybrid.py; modeling :403-682
    f, cap = mla(r, maxpos=r.get("model_max_length", 262144), q_lora=None)
    group = r.get("layer_group_size", 6)  # configuration_bailing_hybrid.py:143-151
    types = _types(r, f["layers"], ["full_attention" if (i + 1) % group == 0 else
                                    "linear_attention" for i in range(f["layers"])])
    moe = _kda_moe(r, f["layers"], 8, 768, r.get("first_k_dense_replace", 2), 512)
    n = r.get("num_expert_group", 8)
    groups = {"router_groups": n, "router_group_topk": r.get("topk_group", 4)} if n > 1 else {}
    return {**f, "attn_gate": "head", **_kda(r, full_rank=True), **moe, **groups,
            "mixers": _mixers(types, "linear")}, cap


FAMILIES = {fn.__name__: fn for fn in (kimi_linear, bailing_hybrid)}
