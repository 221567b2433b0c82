"""DeepSeek-V4's config.json -> ModelSpec fields (``ledger.anatomy.compressed`` says what
each part is). Defaults are DeepseekV4Config's (transformers 5.23.0
``models/deepseek_v4/configuration_deepseek_v4.py``, cited as ``cfg:L``); the released
files carry the legacy keys its ``__post_init__`` folds in (``compress_ratios``,
``num_hash_layers``, ``qk_rope_head_dim``: cfg:L235-291), which Megatron-Bridge's
DeepSeek-V4 bridge reads the same way (``_dsv4_compress_ratios``, ``_dsv4_num_hash_layers``,
src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py L166-224 @ v0.6.0).

Read and pricing nothing the ledger models, so accepted silently: the hash-routed first
layers (``num_hash_layers`` / ``mlp_layer_types`` "hash_moe"): their router keeps its
learned h x E weight and GEMM, only the choice of experts comes from a token-id buffer
(modeling_deepseek_v4.py L1100-1128); the Sinkhorn iterations and epsilon of mHC
(elementwise on n x n per token); the rotary settings; the router's scoring function and
scaling; the release's FP8 / FP4 storage (``quantization_config``, ``expert_dtype``: the
serving checkpoint's, read by ``ledger.serve``).

A null where the class types a key ``int`` / ``float`` (``sliding_window``, ``q_lora_rank``,
``hc_mult`` ...) is refused, as the class's strict dataclass refuses it; a null
``num_hash_layers`` is the class default (3), as its ``__post_init__`` reads it.
"""
from __future__ import annotations

from ledger.anatomy.compressed import RATIOS, CompressedAttention
from ledger.errors import LedgerError
from ledger.io.hf.keys import decoder, expert_count, top_k

# cfg:L28-32: layer type <-> compress ratio; cfg:L148 the default rates
_TYPES = {"sliding_attention": 0, "compressed_sparse_attention": 4,
          "heavily_compressed_attention": 128}
_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _ratios(r, layers: int) -> tuple[int, ...]:
    """Each layer's compress ratio: ``layer_types`` if given, else the legacy per-layer
    ``compress_ratios`` (the released files'; entries past the stack are the MTP block's),
    else the class default - two HCA layers, then CSA and HCA alternating (cfg:L265-275)."""
    rates = r.sub("compress_rates") or _RATES
    if rates != _RATES:
        raise LedgerError("config.json", f"'compress_rates' {rates!r}: only "
                                         f"{_RATES!r} is modelled")
    types = r.get("layer_types", None, list_of=str)
    if types is not None:
        bad = [t for t in types if t not in _TYPES]
        if bad or len(types) < layers:
            raise LedgerError("config.json", f"'layer_types' must name one of "
                                             f"{', '.join(_TYPES)} for each of "
                                             f"num_hidden_layers({layers}), got {types!r}")
        return tuple(_TYPES[t] for t in types[:layers])
    ratios = r.get("compress_ratios", None, list_of=int)
    if ratios is not None:
        if len(ratios) < layers or any(x not in RATIOS for x in ratios):
            raise LedgerError("config.json", f"'compress_ratios' must give one of {RATIOS} "
                                             f"for each of num_hidden_layers({layers}), "
                                             f"got {ratios!r}")
        return tuple(ratios[:layers])
    return tuple([128] * min(layers, 2) + [4 if i % 2 else 128 for i in range(layers - 2)])


def _set(r, key: str, default, typ: type = int):
    """A key DeepseekV4Config types ``int`` (or ``float``) in its strict dataclass
    (cfg:L128-162): absent gives the class default; null is refused as the class refuses it
    (StrictDataclassFieldValidationError), never read as that default."""
    value = r.get(key, default, typ, nullable=True)
    if value is None:
        kind = "an integer" if typ is int else "a number"
        raise LedgerError("config.json", f"{key!r} must be {kind}, got null (DeepseekV4Config "
                                         f"types it {typ.__name__} and refuses None)")
    return value


def _hash_layers(r, layers: int) -> int:
    """How many first layers route by token id (cfg:L277-281: ``mlp_layer_types``, else
    the legacy ``num_hash_layers``, else 3). Every layer is an MoE either way."""
    types = r.get("mlp_layer_types", None, list_of=str)
    if types is None:  # null is the default too (cfg:L279); a negative count is malformed
        n = r.get("num_hash_layers", 3)
        if n < 0:
            raise LedgerError("config.json", f"'num_hash_layers' must be an integer >= 0, "
                                             f"got {n}")
        return min(layers, n)
    if len(types) < layers or any(t not in ("hash_moe", "moe") for t in types):
        raise LedgerError("config.json", f"'mlp_layer_types' must name hash_moe or moe for "
                                         f"each of num_hidden_layers({layers}), got {types!r}")
    return types[:layers].count("hash_moe")


def deepseek_v4(r):  # cfg:L128-162; modeling_deepseek_v4.py L766-810, L1131-1199
    f, cap = decoder(r, kv=1, head_dim=512, tied=False, maxpos=1048576,
                     ffn_key="moe_intermediate_size", ffn=2048)
    r.refuse("num_key_value_heads", 1, "one K=V head broadcast to every head, "
                                       "modeling_deepseek_v4.py L790")
    r.refuse("attention_bias", False, "its projections are built without biases")
    r.refuse("mlp_bias", False, "biases on the shared expert but not the routed ones")
    # transformers builds one shared MLP of moe_intermediate_size whatever the count
    # (L1137, L1026-1028); Megatron-Bridge n_shared x that width (deepseek_v4_bridge.py
    # L508 @ v0.6.0): the two agree at 1 only
    r.refuse("n_shared_experts", 1, "transformers and Megatron-Bridge size the shared "
                                    "expert differently")
    layers = f["layers"]
    ratios = _ratios(r, layers)
    _hash_layers(r, layers)
    index = {"index_heads": _set(r, "index_n_heads", 64),
             "index_head_dim": _set(r, "index_head_dim", 128),
             "index_topk": _set(r, "index_topk", 512)} if 4 in ratios else {}
    width = f["ffn_hidden"]
    return {**f, "attention": "csa", "q_lora_rank": _set(r, "q_lora_rank", 1024),
            "attention_sinks": True, "sliding_window": _set(r, "sliding_window", 128),
            "compressed": CompressedAttention(ratios=ratios, o_groups=_set(r, "o_groups", 8),
                                              o_lora_rank=_set(r, "o_lora_rank", 1024)),
            **index, "hc_mult": _set(r, "hc_mult", 4),
            "num_experts": expert_count(r, "n_routed_experts", 256),
            "top_k": top_k(r, default=6), "moe_ffn_hidden": width, "shared_experts": 1,
            "shared_expert_ffn": width,
            # the routed and shared experts' gate/up clamp (L1033-1034, L1074-1075), which
            # Megatron-Bridge applies as activation_func_clamp_value (bridge L504)
            "glu_clamp": _set(r, "swiglu_limit", 10.0, float),
            "mtp_layers": _set(r, "num_nextn_predict_layers", 1)}, cap


FAMILIES = {"deepseek_v4": deepseek_v4}
