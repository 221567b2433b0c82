"""The config.json keys every family reads alike: the shape of a Llama-like decoder, its
biases, its local layers, its experts. Each reader in ``ledger.io.hf.families`` and the
modules beside it builds on these; ``r`` is a ``ledger.io.hf.reader.Reader``, which type-checks
and names every key it refuses. Defaults are the transformers 5.23.0 config classes'.
"""
from __future__ import annotations

from ledger.errors import LedgerError


def decoder(r, *, kv, head_dim, tied, maxpos, ffn_key="intermediate_size", ffn=None):
    """The keys every Llama-like family shares. ``head_dim`` is read by every modeling
    file as ``getattr(config, "head_dim", None) or hidden // heads`` (e.g.
    modeling_qwen3.py:211), floor division included (GLM-4.5: 4096 // 96 = 42)."""
    hidden, heads = r.get("hidden_size"), r.get("num_attention_heads")
    f = {"layers": r.get("num_hidden_layers"), "hidden": hidden, "heads": heads,
         "vocab": r.get("vocab_size"),
         "ffn_hidden": r.get(ffn_key) if ffn is None else r.get(ffn_key, ffn),
         "kv_heads": r.get("num_key_value_heads", kv),
         "head_dim": r.get("head_dim", head_dim) or (hidden // heads if heads > 0 else None),
         "tied_embeddings": r.get("tie_word_embeddings", tied, bool)}
    return f, r.get("max_position_embeddings", maxpos)


def bias(r, key="attention_bias", default=False):
    b = r.get(key, default, bool)
    return {"qkv_bias": b, "out_bias": b}


def every_layer_window(r, default=None):
    """Mistral, Mixtral, Phi-3, Starcoder2: ``sliding_window`` masks every layer
    (modeling_mistral.py:353 picks the sliding mask for the whole stack)."""
    w = r.get("sliding_window", default, int, nullable=True)
    return {"sliding_window": w} if w else {}


def qwen_window(r, layers, alternate=False):
    """Qwen2/Qwen3 (configuration_qwen3.py:87-95): with use_sliding_window, layers from
    max_window_layers on are sliding; Qwen2-MoE (configuration_qwen2_moe.py:113-118):
    every other layer below max_window_layers."""
    w = r.get("sliding_window", 4096, int, nullable=True)
    if not r.get("use_sliding_window", False, bool) or w is None:
        return {}
    top = r.get("max_window_layers", 28)
    default = [i for i in range(layers) if ((i + 1) % 2 and i < top)] if alternate \
        else [i for i in range(layers) if i >= top]
    local = r.layer_types(layers, default)
    return {"sliding_window": w, "local_layers": local} if local else {}


def alternating(r, layers, window, pattern):
    """Gemma 2, gpt-oss (every 2nd layer global), Gemma 3 (every 6th): layer i is
    sliding when (i + 1) % pattern != 0 (configuration_gemma2.py:95-97)."""
    w = r.get("sliding_window", window, int, nullable=True)
    if not w:
        return {}
    local = r.layer_types(layers, [i for i in range(layers) if (i + 1) % pattern])
    return {"sliding_window": w, "local_layers": local} if local else {}


def sparse_layers(r, layers, dense=()):
    """Qwen2-MoE / Qwen3-MoE (modeling_qwen3_moe.py:308): MoE unless in mlp_only_layers
    (``dense`` by default), and only every decoder_sparse_step-th layer ((i + 1) % step
    == 0)."""
    step = r.get("decoder_sparse_step", 1)
    dense = set(r.get("mlp_only_layers", list(dense), list))
    return tuple(i for i in range(layers) if i not in dense and (i + 1) % step == 0)


def expert_count(r, key, default, dense_ok=False, alias=None):
    """The routed-expert count. transformers builds a router even for one expert, the
    ledger's MoE needs two or more: 1 (and 0 where the family has no dense fallback,
    unlike Qwen-MoE's ``num_experts > 0`` test, modeling_qwen3_moe.py:308) is refused.
    ``alias``: the name a config class's attribute_map writes the count under."""
    e = r.get(key, None)
    if alias is not None and alias in r.cfg:
        other = r.get(alias)
        if e is not None and e != other:
            raise LedgerError("config.json", f"{key!r} = {e} and {alias!r} = {other} disagree")
        e = other
    e = default if e is None else e
    if e is None:
        raise LedgerError("config.json", f"missing key {key!r} for model_type {r.kind!r} "
                                         f"(its config class defaults it to None)")
    if e == 1 or (e == 0 and not dense_ok):
        raise LedgerError("config.json", f"{key!r} = {e} is not supported for model_type "
                                         f"{r.kind!r} (an MoE needs 2 or more experts)")
    return e


def softcaps(r, attn, final):
    return {"attn_logit_softcap": r.get("attn_logit_softcapping", attn, float) or 0.0,
            "final_logit_softcap": r.get("final_logit_softcapping", final, float) or 0.0}


def windows(r, layers, window=None, local=()):
    """Local layers as ``layer_types`` lists them (sliding or chunked), else the family's
    own pattern ``local``, masked to ``sliding_window`` keys; none without a window."""
    w = r.get("sliding_window", window, int, nullable=True)
    if not w:
        return {}
    ids = r.layer_types(layers, list(local))
    return {"sliding_window": w, "local_layers": ids} if ids else {}


def every(layers: int, n: int, offset: int = 0) -> list[int]:
    """Layers i with (i + 1 - offset) % n != 0: the local layers of a pattern whose every
    n-th layer is global (Gemma 2's, EXAONE 4's, Gemma 3's sliding_window_pattern)."""
    return [i for i in range(layers) if (i + 1 - offset) % n]


def mlp_types(r, layers: int, default: list[str]) -> list[str]:
    """``mlp_layer_types``: per layer "dense" or "sparse" (MoE)."""
    types = r.get("mlp_layer_types", None, list_of=str) or default
    if len(types) != layers or any(t not in ("dense", "sparse") for t in types):
        raise LedgerError("config.json", f"'mlp_layer_types' must list dense or sparse for "
                                         f"each of num_hidden_layers({layers}), got {types!r}")
    return types


def mla(r, *, maxpos, q_lora=1536, kv_lora=512, rope=64, nope=128, v=128, tied=False):
    """Multi-head latent attention's keys (DeepSeek-V2 sec. 2.1; modeling_deepseek_v3.py
    :371-404), every head its own K/V after the up-projection; a null q_lora_rank is a
    plain q_proj."""
    f, cap = decoder(r, kv=None, head_dim=None, tied=tied, maxpos=maxpos)
    f.update(kv_heads=f["heads"], head_dim=None, attention="mla", **bias(r),
             q_lora_rank=r.get("q_lora_rank", q_lora, int, nullable=True),
             kv_lora_rank=r.get("kv_lora_rank", kv_lora),
             qk_rope_head_dim=r.get("qk_rope_head_dim", rope),
             qk_nope_head_dim=r.get("qk_nope_head_dim", nope),
             v_head_dim=r.get("v_head_dim", v))
    return f, cap


def top_k(r, key="num_experts_per_tok", default=None):
    """Experts per token; a class default of None (DeepSeek-V2's) is no count to hold."""
    k = r.get(key, default)
    if k is None:
        raise LedgerError("config.json", f"missing key {key!r} for model_type {r.kind!r} "
                                         f"(its config class defaults it to None)")
    return k


def sparse_ids(types: list[str]) -> tuple[int, ...]:
    """The MoE layers of an ``mlp_layer_types`` list."""
    return tuple(i for i, t in enumerate(types) if t == "sparse")


def yarn_mscale(r) -> dict:
    """YaRN's attention factor on cos and sin (``rope_scaling``, rope_type "yarn"), as
    transformers 5.23.0 modeling_rope_utils.py _compute_yarn_parameters takes it: the
    config's ``attention_factor`` where given, else get_mscale(factor, mscale) /
    get_mscale(factor, mscale_all_dim) where both are given and non-zero, else
    0.1 ln(factor) + 1, ``factor`` defaulting to max_position_embeddings over
    original_max_position_embeddings (Megatron-Core yarn_rotary_pos_embedding.py L252-283
    @ d7288711 computes it alike); {} when it is 1 or the config has no YaRN. A value that
    is not a finite number, or a factor that is not a positive one, is refused by name."""
    import math

    rope = r.sub("rope_scaling")
    if rope.get("rope_type", rope.get("type")) != "yarn":
        return {}

    def number(key, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise LedgerError("config.json", f"rope_scaling {key!r} = {value!r} is not a "
                                             f"finite number")
        return float(value)
    factor = rope.get("factor")
    if factor is None:
        top, orig = r.cfg.get("max_position_embeddings"), rope.get(
            "original_max_position_embeddings")
        if top is None or not orig:
            raise LedgerError("config.json", "rope_scaling YaRN has no 'factor' and no "
                                             "max_position_embeddings / original_max_position_"
                                             f"embeddings to take it from: got {top!r} / {orig!r}")
        factor = number("max_position_embeddings", top) / number(
            "original_max_position_embeddings", orig)
    factor = number("factor", factor)
    if factor <= 0:
        raise LedgerError("config.json", f"rope_scaling 'factor' = {factor:g} must be positive")

    def get_mscale(m):
        return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0
    attention, m, all_dim = (rope.get(k) for k in ("attention_factor", "mscale",
                                                   "mscale_all_dim"))
    if attention is not None:
        value = number("attention_factor", attention)
    elif m and all_dim:
        num, den = get_mscale(number("mscale", m)), get_mscale(number("mscale_all_dim", all_dim))
        if den <= 0 or num <= 0:
            raise LedgerError("config.json", f"rope_scaling mscale = {m!r} / mscale_all_dim = "
                                             f"{all_dim!r} give a YaRN attention factor of "
                                             f"{num:g} / {den:g}, not a positive number")
        value = num / den
    else:
        value = get_mscale(1.0)
    if value <= 0:
        raise LedgerError("config.json", f"rope_scaling 'attention_factor' = {value:g} must be "
                                         f"positive")
    return {} if value == 1.0 else {"rope_mscale": value}
