"""Hybrid stacks, family by family: which layers attend, which run a recurrent mixer
(``ledger.anatomy.mixers``: Mamba-1/2, Gated DeltaNet, Kimi Delta Attention, lightning attention,
LFM2's short convolution) and which have no MLP. Readers as in ``ledger.io.hf.families``;
the config keys and defaults are transformers 5.23.0's, the counts held to its own in
``tests/test_corpus.py``.
"""
from __future__ import annotations

import math

from ledger.errors import LedgerError
from ledger.io.hf.keys import decoder, expert_count, sparse_layers, top_k, windows
from ledger.anatomy.mixers import LinearAttention, Mamba, ShortConv

UNCAPPED = 1 << 20  # no max_position_embeddings: the run's length is the ledger's default
# transformers' layer type names, the legacy ones with them (configuration_utils.py:94-99)
ATTENTION = ("full_attention", "attention", "sliding_attention")
RECURRENT = ("linear_attention", "mamba", "conv")


def _types(r, layers: int, default: list[str], key="layer_types") -> list[str]:
    types = r.get(key, None, list_of=str) or default
    if len(types) != layers:
        raise LedgerError("config.json", f"{key!r} has {len(types)} entries for "
                                         f"num_hidden_layers({layers})")
    bad = [t for t in types if t not in ATTENTION + RECURRENT + ("mlp", "moe")]
    if bad:
        raise LedgerError("config.json", f"{key!r} entry {bad[0]!r} is not a layer type the "
                                         f"ledger knows")
    return types


def _interval_types(r, layers: int) -> list[str]:
    """The layer types Qwen3-Next's family derives when the file gives none: every
    ``full_attention_interval``-th layer full attention, the rest Gated DeltaNet
    (configuration_qwen3_next.py:130-135, qwen3_5 :112-117, qwen3_5_moe :124-129)."""
    every = r.get("full_attention_interval", 4, int)
    if every < 1:
        raise LedgerError("config.json", f"'full_attention_interval' must be >= 1, got {every}")
    return ["linear_attention" if (i + 1) % every else "full_attention" for i in range(layers)]


def _mixers(types: list[str], recurrent: str) -> tuple[str, ...]:
    return tuple("attention" if t in ATTENTION else recurrent for t in types)


NO_ATTENTION = {"heads": 1, "kv_heads": 1}  # a stack that never attends: one nominal head


def _mamba1(r, *, inner, state, kernel, dt_rank, conv_bias, proj_bias, dt_norms=False):
    if dt_rank == "auto":  # configuration_mamba.py:95-97
        dt_rank = math.ceil(r.get("hidden_size") / 16)
    if isinstance(dt_rank, bool) or not isinstance(dt_rank, int):
        raise LedgerError("config.json", f"the dt rank must be an integer or 'auto', got "
                                         f"{dt_rank!r}")
    return Mamba(version=1, inner=inner, state=state, conv_kernel=kernel, dt_rank=dt_rank,
                 conv_bias=conv_bias, proj_bias=proj_bias, dt_norms=dt_norms)


def mamba(r):  # configuration_mamba.py; modeling_mamba.py:302-330, one norm a block
    h, layers = r.get("hidden_size"), r.get("num_hidden_layers")
    mb = _mamba1(r, inner=r.get("intermediate_size", 2 * h), state=r.get("state_size", 16),
                 kernel=r.get("conv_kernel", 4), dt_rank=r.cfg.get("time_step_rank", "auto"),
                 conv_bias=r.get("use_conv_bias", True, bool),
                 proj_bias=r.get("use_bias", False, bool))
    return {"layers": layers, "hidden": h, **NO_ATTENTION, "vocab": r.get("vocab_size"),
            "ffn_hidden": mb.inner, "mixers": ("mamba",) * layers, "mamba": mb,
            "no_mlp_layers": tuple(range(layers)),
            "tied_embeddings": r.get("tie_word_embeddings", True, bool)}, UNCAPPED


def falcon_mamba(r):  # configuration_falcon_mamba.py; B/C/dt norms without weights
    return mamba(r)


def mamba2(r):  # configuration_mamba2.py; modeling_mamba2.py:385-437
    h, layers = r.get("hidden_size"), r.get("num_hidden_layers")
    mb = Mamba(version=2, inner=int(r.get("expand", 2, float) * h),
               state=r.get("state_size", 128), conv_kernel=r.get("conv_kernel", 4),
               heads=r.get("num_heads", 128), groups=r.get("n_groups", 8),
               conv_bias=r.get("use_conv_bias", True, bool),
               proj_bias=r.get("use_bias", False, bool), chunk=r.get("chunk_size", 256))
    return {"layers": layers, "hidden": h, **NO_ATTENTION, "vocab": r.get("vocab_size"),
            "ffn_hidden": mb.inner, "mixers": ("mamba",) * layers, "mamba": mb,
            "no_mlp_layers": tuple(range(layers)),
            "tied_embeddings": r.get("tie_word_embeddings", False, bool)}, UNCAPPED


def _mamba2_keys(r, prefix="mamba_", inner=None, norm=True) -> Mamba:
    """Bamba, Granite-4, Falcon-H1's Mamba-2 keys (mamba_n_heads, mamba_d_head, ...)."""
    h = r.get("hidden_size")
    inner = inner or int(r.get(prefix + "expand", 2, float) * h)
    return Mamba(version=2, inner=inner, state=r.get(prefix + "d_state", 256),
                 conv_kernel=r.get(prefix + "d_conv", 4), heads=r.get(prefix + "n_heads", 128),
                 groups=r.get(prefix + "n_groups", 1),
                 conv_bias=r.get(prefix + "conv_bias", True, bool),
                 proj_bias=r.get(prefix + "proj_bias", False, bool), gated_norm=norm,
                 chunk=r.get(prefix + "chunk_size", 256))


def bamba(r):  # configuration_bamba.py; Mamba-2 layers, attention at attn_layer_indices
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=262144)
    ids = set(r.get("attn_layer_indices", None, list_of=int) or ())
    return {**f, "mlp_bias": r.get("mlp_bias", False, bool), "mamba": _mamba2_keys(r),
            "mixers": tuple("attention" if i in ids else "mamba" for i in range(f["layers"]))
            }, cap


def granitemoehybrid(r):  # configuration_granitemoehybrid.py; modeling :518-543, :953
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=2048)
    types = _types(r, f["layers"], ["mamba"] * f["layers"])
    e = expert_count(r, "num_local_experts", 8, dense_ok=True)
    shared = r.get("shared_intermediate_size", 1024)
    mlp = {"num_experts": e, "top_k": r.get("num_experts_per_tok", 2),
           "moe_ffn_hidden": f["ffn_hidden"], "shared_experts": 1,
           "shared_expert_ffn": shared} if e > 1 else {"ffn_hidden": shared}
    return {**f, "qkv_bias": r.get("attention_bias", False, bool),
            "out_bias": r.get("attention_bias", False, bool), **mlp,
            "mixers": _mixers(types, "mamba"), "mamba": _mamba2_keys(r)}, cap


def falcon_h1(r):  # configuration_falcon_h1.py; modeling_falcon_h1.py:598-656, :873-921
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=8192)
    r.refuse("projectors_bias", False, "biases on the attention and Mamba projections")
    d_ssm = r.get("mamba_d_ssm", 1024)  # configuration_falcon_h1.py; null: expand x hidden
    mb = _mamba2_keys(r, inner=d_ssm, norm=r.get("mamba_rms_norm", False, bool))
    return {**f, "qkv_bias": r.get("attention_bias", False, bool),
            "out_bias": r.get("attention_bias", False, bool),
            "mlp_bias": r.get("mlp_bias", False, bool), "mamba": mb,
            "mixers": ("attention+mamba",) * f["layers"]}, cap  # both in every layer, summed


def nemotron_h(r):  # configuration_nemotron_h.py:84-205; one block a layer, M * - E
    pattern = r.cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        letters = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
        if set(pattern) - set(letters):
            raise LedgerError("config.json", f"'hybrid_override_pattern' {pattern!r}: letters "
                                             f"M, E, * and - only")
        types = [letters[c] for c in pattern]
    else:
        types = r.get("layers_block_type", None, list_of=str) or \
            ["linear_attention", "moe", "full_attention", "mlp"]
    h = r.get("hidden_size")
    heads = r.get("num_attention_heads")
    layers = len(types)
    mb = Mamba(version=2, inner=r.get("mamba_num_heads", 128) * r.get("mamba_head_dim", 64),
               state=r.get("ssm_state_size", 128), conv_kernel=r.get("conv_kernel", 4),
               heads=r.get("mamba_num_heads", 128), groups=r.get("n_groups", 8),
               conv_bias=r.get("use_conv_bias", True, bool),
               proj_bias=r.get("mamba_proj_bias", False, bool), chunk=r.get("chunk_size", 128))
    mixers = tuple({"linear_attention": "mamba", "mamba": "mamba", "full_attention":
                    "attention", "attention": "attention"}.get(t, "none") for t in types)
    no_mlp = tuple(i for i, t in enumerate(types) if t not in ("mlp", "moe"))
    moe_ids = tuple(i for i, t in enumerate(types) if t == "moe")
    e = expert_count(r, "n_routed_experts", 8, dense_ok=True) if moe_ids else 0
    moe = {"num_experts": e, "top_k": top_k(r, "num_experts_per_tok", 2),
           "moe_ffn_hidden": r.get("moe_intermediate_size", 7688), "moe_layer_ids": moe_ids,
           "shared_experts": r.get("n_shared_experts", 1),
           "shared_expert_ffn": r.get("moe_shared_expert_intermediate_size", 7688),
           "moe_latent": r.get("moe_latent_size", None, int, nullable=True),
           **_nemotron_mtp(r)} if e > 1 else {}
    b = r.get("attention_bias", False, bool)
    return {"layers": layers, "hidden": h, "heads": heads,
            "kv_heads": r.get("num_key_value_heads", 8), "head_dim": r.get("head_dim", 128),
            "vocab": r.get("vocab_size"), "ffn_hidden": r.get("intermediate_size"),
            "gated_mlp": False,  # ReLU^2 up/down MLPs and experts (mlp_hidden_act)
            "qkv_bias": b, "out_bias": b, "mlp_bias": r.get("mlp_bias", False, bool),
            "mixers": mixers, "mamba": mb, "no_mlp_layers": no_mlp, **moe,
            "tied_embeddings": r.get("tie_word_embeddings", False, bool)}, \
        r.get("max_position_embeddings", 4096)


def _nemotron_mtp(r) -> dict:
    """Nemotron 3's MTP block (configuration_nemotron_h.py:145-146, :189-199): its depths
    (num_nextn_predict_layers; transformers builds none of them, :1012, so they are not in
    ``params``) and their layers, mtp_layers_block_type or the legacy
    mtp_hybrid_override_pattern (default attention, then MoE)."""
    depths = r.get("num_nextn_predict_layers", 0)
    pattern = r.cfg.get("mtp_hybrid_override_pattern")
    types = r.get("mtp_layers_block_type", None, list_of=str)
    if types is not None:
        names = {"full_attention": "*", "attention": "*", "moe": "E", "mlp": "-",
                 "linear_attention": "M", "mamba": "M"}
        if set(types) - set(names):
            raise LedgerError("config.json", f"'mtp_layers_block_type' {types!r}: attention, "
                                             f"moe, mlp and mamba only")
        pattern = "".join(names[t] for t in types)
    pattern = "*E" if pattern is None else pattern
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise LedgerError("config.json", f"'mtp_hybrid_override_pattern' {pattern!r}: "
                                         f"letters M, *, - and E only")
    return {"mtp_layers": depths, "mtp_pattern": pattern} if depths else {}


def jamba(r):  # configuration_jamba.py:109-123; modeling_jamba.py:463-499
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=262144)
    layers, h = f["layers"], f["hidden"]
    a_period, a_offset = r.get("attn_layer_period", 8), r.get("attn_layer_offset", 4)
    e_period, e_offset = r.get("expert_layer_period", 2), r.get("expert_layer_offset", 1)
    for period, offset, what in ((a_period, a_offset, "attn"), (e_period, e_offset, "expert")):
        if period < 1 or not 0 <= offset < period:
            raise LedgerError("config.json", f"'{what}_layer_offset' ({offset}) must lie in "
                                             f"[0, {what}_layer_period({period}))")
    mb = _mamba1(r, inner=r.get("mamba_expand", 2) * h, state=r.get("mamba_d_state", 16),
                 kernel=r.get("mamba_d_conv", 4), dt_rank=r.cfg.get("mamba_dt_rank", "auto"),
                 conv_bias=r.get("mamba_conv_bias", True, bool),
                 proj_bias=r.get("mamba_proj_bias", False, bool), dt_norms=True)
    e = expert_count(r, "num_experts", 16, dense_ok=True)
    moe = {"num_experts": e, "top_k": r.get("num_experts_per_tok", 2),
           "moe_layer_ids": tuple(i for i in range(layers) if i % e_period == e_offset)} \
        if e > 1 else {}
    return {**f, "mamba": mb, **moe, "mixers": tuple(
        "attention" if i % a_period == a_offset else "mamba" for i in range(layers))}, cap


def _gdn(r, kv_heads="linear_num_key_heads", v_heads="linear_num_value_heads") -> dict:
    return {"linear": LinearAttention(
        kind="gdn", key_heads=r.get(kv_heads, 16), key_dim=r.get("linear_key_head_dim", 128),
        value_heads=r.get(v_heads, 32), value_dim=r.get("linear_value_head_dim", 128),
        conv_kernel=r.get("linear_conv_kernel_dim", 4))}


def qwen3_next(r):  # configuration_qwen3_next.py; modeling_qwen3_next.py:241-243, :599-624
    f, cap = decoder(r, kv=2, head_dim=256, tied=False, maxpos=32768)
    types = _types(r, f["layers"], _interval_types(r, f["layers"]))
    e = expert_count(r, "num_experts", 512, dense_ok=True)
    moe = {"num_experts": e, "top_k": r.get("num_experts_per_tok", 10),
           "moe_ffn_hidden": r.get("moe_intermediate_size", 512), "shared_experts": 1,
           "shared_expert_ffn": r.get("shared_expert_intermediate_size", 512),
           "shared_expert_gate": True, "moe_layer_ids": sparse_layers(r, f["layers"])} \
        if e > 1 else {}
    b = r.get("attention_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "qk_norm": "head", "attn_gate": "elementwise",
            **moe, **_gdn(r), "mixers": _mixers(types, "linear")}, cap


def qwen3_5_text(r):  # configuration_qwen3_5.py; Qwen3-Next's mixers, a dense MLP
    f, cap = decoder(r, kv=4, head_dim=256, tied=False, maxpos=32768)
    types = _types(r, f["layers"], _interval_types(r, f["layers"]))
    b = r.get("attention_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "qk_norm": "head", "attn_gate": "elementwise",
            **_gdn(r), "mixers": _mixers(types, "linear")}, cap


def qwen3_5_moe_text(r):  # configuration_qwen3_5_moe.py; experts on every layer
    f, cap = decoder(r, kv=2, head_dim=256, tied=False, maxpos=32768,
                     ffn_key="moe_intermediate_size")
    types = _types(r, f["layers"], _interval_types(r, f["layers"]))
    b = r.get("attention_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "qk_norm": "head", "attn_gate": "elementwise",
            "num_experts": expert_count(r, "num_experts", 256),
            "top_k": r.get("num_experts_per_tok", 8), "shared_experts": 1,
            "shared_expert_ffn": r.get("shared_expert_intermediate_size", 512),
            "shared_expert_gate": True, **_gdn(r), "mixers": _mixers(types, "linear")}, cap


def olmo_hybrid(r):  # configuration_olmo_hybrid.py:121-141; modeling_olmo_hybrid.py:596-630
    f, cap = decoder(r, kv=None, head_dim=None, tied=False, maxpos=65536)
    layers, heads = f["layers"], f["heads"]
    default = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
    if "full_attention" not in default:
        default[-1] = "full_attention"
    types = _types(r, layers, default)
    kh = r.get("linear_num_key_heads", heads)
    kd = r.get("linear_key_head_dim", int(0.75 * f["hidden"] / kh) if kh > 0 else 1)
    la = LinearAttention(kind="gdn", key_heads=kh, key_dim=kd,
                         value_heads=r.get("linear_num_value_heads", heads),
                         value_dim=r.get("linear_value_head_dim", 2 * kd),
                         conv_kernel=r.get("linear_conv_kernel_dim", 4))
    b = r.get("attention_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "qk_norm": "full", "linear": la,
            "mixers": _mixers(types, "linear")}, cap


def minimax(r, types=None):  # configuration_minimax.py; modeling_minimax.py:125-138
    f, cap = decoder(r, kv=8, head_dim=None, tied=False, maxpos=131072)
    # configuration_minimax.py:123-126: even layers attend, odd ones are lightning
    types = types or _types(r, f["layers"], ["full_attention" if (i + 1) % 2 else
                                             "linear_attention" for i in range(f["layers"])])
    lightning = LinearAttention(kind="lightning", key_heads=f["heads"], key_dim=f["head_dim"],
                                value_heads=f["heads"], value_dim=f["head_dim"],
                                chunk=r.get("block_size", 256))
    return {**f, "num_experts": expert_count(r, "num_local_experts", 8),
            "top_k": r.get("num_experts_per_tok", 2), "linear": lightning,
            "mixers": _mixers(types, "linear"), **windows(r, f["layers"])}, cap


def minimax_m1(r):  # remote code (MiniMaxAI/MiniMax-M1 modeling_minimax_m1.py), as minimax
    """MiniMax-M1 / MiniMax-Text-01 under their own model_type: ``attn_type_list`` gives
    each layer's mixer (0 lightning, 1 softmax: the remote MiniMaxM1DecoderLayer builds
    lightning attention where it is 0), counted as transformers' minimax with that
    layer_types; a shared expert
    (``shared_intermediate_size`` > 0) is refused, its layers being unread."""
    r.refuse("shared_intermediate_size", 0, "a shared expert with a sigmoid gate beside the "
                                            "routed ones")
    codes = r.get("attn_type_list", None, list_of=int)
    layers = r.get("num_hidden_layers")
    if codes is None or len(codes) != layers or any(c not in (0, 1) for c in codes):
        raise LedgerError("config.json", f"'attn_type_list' must give 0 (lightning) or 1 "
                                         f"(softmax) for each of num_hidden_layers({layers}), "
                                         f"got {codes!r}")
    return minimax(r, ["full_attention" if c else "linear_attention" for c in codes])


def _lfm_ffn(r, width: int) -> int:
    """LFM2's MLP width (modeling_lfm2.py:115-122): 2/3 of intermediate_size, scaled by
    block_ffn_dim_multiplier and rounded up to block_multiple_of."""
    if not r.get("block_auto_adjust_ff_dim", True, bool):
        return width
    width = int(2 * width / 3)
    mult = r.get("block_ffn_dim_multiplier", 1.0, float, nullable=True)
    if mult is not None:
        step = r.get("block_multiple_of", 256)
        width = step * ((int(mult * width) + step - 1) // step)
    return width


def _lfm_types(r, layers: int) -> tuple[str, ...]:
    """LFM2's layer_types (conv or full_attention), else full_attn_idxs (configuration_lfm2
    .py:82-87: none given, every layer attends)."""
    ids = r.get("full_attn_idxs", None, list_of=int)
    default = ["full_attention"] * layers if ids is None else [
        "full_attention" if i in ids else "conv" for i in range(layers)]
    return _mixers(_types(r, layers, default), "conv")


def lfm2(r):  # configuration_lfm2.py; modeling_lfm2.py (attention qk-norm, ShortConv)
    f, cap = decoder(r, kv=8, head_dim=None, tied=True, maxpos=128000)
    mixers = _lfm_types(r, f["layers"])
    conv = {"conv": ShortConv(kernel=r.get("conv_L_cache", 3),
                              bias=r.get("conv_bias", False, bool))} if "conv" in mixers else {}
    return {**f, "ffn_hidden": _lfm_ffn(r, f["ffn_hidden"]), "qk_norm": "head",
            "mixers": mixers, **conv}, cap


def lfm2_moe(r):  # configuration_lfm2_moe.py; expert_bias is a buffer (not counted)
    f, cap = decoder(r, kv=8, head_dim=None, tied=True, maxpos=128000)
    mixers = _lfm_types(r, f["layers"])
    conv = {"conv": ShortConv(kernel=r.get("conv_L_cache", 3),
                              bias=r.get("conv_bias", False, bool))} if "conv" in mixers else {}
    return {**f, "qk_norm": "head", "mixers": mixers, **conv,
            "num_experts": expert_count(r, "num_experts", 32),
            "top_k": r.get("num_experts_per_tok", 4),
            "moe_ffn_hidden": r.get("moe_intermediate_size", 1792),
            "first_dense_layers": r.get("num_dense_layers", 2)}, cap


def lfm3(r):  # configuration_lfm3.py; modeling_lfm3.py:239,361 conv and gated attention
    f, cap = decoder(r, kv=4, head_dim=128, tied=True, maxpos=128000)
    types = _types(r, f["layers"], [  # configuration_lfm3.py:94-97
        "full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0
        else "conv" for i in range(f["layers"])])
    mixers = tuple("conv" if t == "conv" else "attention" for t in types)
    local = [i for i, t in enumerate(types) if t == "sliding_attention"]
    w = r.get("sliding_window", 256, int, nullable=True)
    window = {"sliding_window": w, "local_layers": tuple(local)} if w and local else {}
    b = r.get("attention_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "qk_norm": "head",
            "attn_gate": "head" if r.get("use_attention_gate", True, bool) else "none",
            "layer_norms": 4 if r.get("use_sandwich_norm", True, bool) else 2,
            "conv": ShortConv(kernel=r.get("conv_L_cache", 7),
                              bias=r.get("conv_bias", False, bool)),
            "mixers": mixers, **window}, cap


FAMILIES = {fn.__name__: fn for fn in (
    mamba, falcon_mamba, mamba2, bamba, granitemoehybrid, falcon_h1, nemotron_h, jamba,
    qwen3_next, qwen3_5_text, qwen3_5_moe_text, olmo_hybrid, minimax, lfm2, lfm2_moe, lfm3)}

