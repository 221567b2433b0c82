"""Construction checks of a ModelSpec: one LedgerError naming the field and its value.

Kept apart from ``ledger.model`` so the record and its counts stay short; the checks
take the spec as an argument and import nothing of the ledger but its errors.
"""
from __future__ import annotations

from ledger.errors import LedgerError, require_positive
from ledger.anatomy.mixers import MIXERS, GlobalAttention, LinearAttention, Mamba, ShortConv

NORMS = ("rmsnorm", "layernorm")
ATTENTIONS = ("mha", "mla", "csa")  # mha covers GQA and MQA through kv_heads
QK_NORMS = ("none", "head", "full")
LOCAL_KINDS = ("sliding", "chunked")

_SIZES = ("layers", "hidden", "heads", "vocab", "seq_len", "ffn_hidden")
_COUNTS = ("learned_positions", "num_experts", "shared_experts", "first_dense_layers",
           "layer_norms", "mtp_layers", "act_params", "index_heads", "index_head_dim",
           "index_topk", "hc_mult")
_FLAGS = ("gated_mlp", "tied_embeddings", "qkv_bias", "out_bias", "mlp_bias",
          "attention_sinks", "shared_expert_gate", "router_bias", "seq_default",
          "attn_gate_bias", "diff_attention", "norm_weights", "embedding_norm", "final_norm",
          "sub_norms", "lm_head_bias", "moe_norm", "mtp_shared", "hc_head")
ATTN_GATES = ("none", "elementwise", "head")


def _nonneg(m, f: str) -> None:
    v = getattr(m, f)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise LedgerError(f, f"must be an integer >= 0, got {v!r}")


def _choice(m, f: str, allowed: tuple[str, ...]) -> None:
    if getattr(m, f) not in allowed:
        raise LedgerError(f, f"must be one of {', '.join(allowed)}, got {getattr(m, f)!r}")


def _indices(m, f: str) -> None:
    ids = getattr(m, f)
    if ids is None:
        return
    if not isinstance(ids, tuple) or any(isinstance(i, bool) or not isinstance(i, int)
                                         for i in ids):
        raise LedgerError(f, f"must be a tuple of layer indices, got {ids!r}")
    bad = [i for i in ids if not 0 <= i < m.layers]
    if bad:
        raise LedgerError(f, f"layer index {bad[0]} outside 0..{m.layers - 1}")
    if list(ids) != sorted(set(ids)):
        raise LedgerError(f, f"layer indices must be increasing and distinct, got {ids!r}")


def check_sizes(m) -> None:
    """The shape fields every model has (before defaults are filled in)."""
    for f in _SIZES:
        require_positive(f, getattr(m, f))
    for f in _FLAGS:
        if not isinstance(getattr(m, f), bool):
            raise LedgerError(f, f"must be true or false, got {getattr(m, f)!r}")
    for f in _COUNTS:
        _nonneg(m, f)
    _choice(m, "norm", NORMS)
    _choice(m, "attention", ATTENTIONS)
    _choice(m, "qk_norm", QK_NORMS)
    _choice(m, "local_attention", LOCAL_KINDS)
    _choice(m, "attn_gate", ATTN_GATES)
    if m.embedding_rows is not None:
        require_positive("embedding_rows", m.embedding_rows)


def check_head_width(m) -> None:
    """Without an explicit head_dim a head is hidden / heads wide, which must be whole."""
    if m.attention != "mla" and m.hidden % m.heads:
        raise LedgerError("head_dim", f"hidden({m.hidden}) is not divisible by heads("
                                      f"{m.heads}), so there is no default head width; "
                                      f"set it")


def check_attention(m) -> None:
    """GQA divisibility; MLA's ranks and head dims (DeepSeek-V2 paper, sec. 2.1)."""
    for f in ("kv_heads", "head_dim", "v_head_dim"):
        require_positive(f, getattr(m, f))
    if m.heads % m.kv_heads:
        raise LedgerError("kv_heads",
                          f"heads({m.heads}) is not divisible by kv_heads({m.kv_heads})")
    mla = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim")
    if m.attention == "mla":
        for f in mla:
            require_positive(f, getattr(m, f))
        if m.q_lora_rank is not None:
            require_positive("q_lora_rank", m.q_lora_rank)
        if m.head_dim != m.qk_nope_head_dim + m.qk_rope_head_dim:
            raise LedgerError("head_dim", f"MLA's query/key head is qk_nope_head_dim("
                              f"{m.qk_nope_head_dim}) + qk_rope_head_dim({m.qk_rope_head_dim})"
                              f", got head_dim({m.head_dim})")
        if m.qk_norm != "none":
            raise LedgerError("qk_norm", "MLA normalises its latents, not q/k: use 'none'")
        return
    latent = () if m.attention == "csa" else ("q_lora_rank",)  # DeepSeek-V4's query latent
    if m.attention == "csa":
        require_positive("q_lora_rank", m.q_lora_rank)
    for f in (*mla, *latent):
        if getattr(m, f):
            raise LedgerError(f, f"is an MLA field; set attention='mla' (got {getattr(m, f)})")


def check_local(m) -> None:
    """Sliding-window / chunked layers: a positive window and valid layer indices."""
    if m.sliding_window is not None:
        require_positive("sliding_window", m.sliding_window)
    elif m.local_layers is not None:
        raise LedgerError("local_layers", "local layers need a sliding_window")
    _indices(m, "local_layers")
    for f in ("attn_logit_softcap", "final_logit_softcap", "glu_clamp"):
        v = getattr(m, f)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise LedgerError(f, f"must be a number >= 0 (0 = off), got {v!r}")
    v = m.rope_mscale  # YaRN's factor on cos / sin: 1 is none, 0 or less would zero them
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise LedgerError("rope_mscale", f"must be a number > 0 (1 = no YaRN factor), got {v!r}")


def check_moe(m) -> None:
    """Experts, their widths and which layers carry them."""
    require_positive("top_k", m.top_k)
    require_positive("moe_ffn_hidden", m.moe_ffn_hidden)
    if m.is_moe and m.top_k > m.num_experts:
        raise LedgerError("top_k", f"top_k({m.top_k}) exceeds num_experts({m.num_experts})")
    if m.first_dense_layers > m.layers:
        raise LedgerError("first_dense_layers", f"first_dense_layers({m.first_dense_layers})"
                                                f" exceeds layers({m.layers})")
    _indices(m, "moe_layer_ids")
    if m.shared_expert_ffn is not None:
        require_positive("shared_expert_ffn", m.shared_expert_ffn)
        if not m.shared_experts:
            raise LedgerError("shared_expert_ffn", "needs shared_experts >= 1")
    if m.shared_expert_gate and not m.shared_experts:
        raise LedgerError("shared_expert_gate", "needs shared_experts >= 1")
    if m.router_groups or m.router_group_topk:
        _check_router_groups(m)
    _check_latent_and_mtp(m)
    for f in ("shared_experts", "router_bias", "moe_layer_ids", "mtp_layers", "router_groups"):
        v = getattr(m, f)
        if v and not m.is_moe and f != "mtp_layers":
            raise LedgerError(f, f"is an MoE field but num_experts({m.num_experts}) < 2")


def _check_latent_and_mtp(m) -> None:
    """LatentMoE's width (an MoE field) and an MTP block's layer letters (M * - E)."""
    if m.moe_latent is not None:
        require_positive("moe_latent", m.moe_latent)
        if not m.is_moe:
            raise LedgerError("moe_latent", f"is an MoE field but num_experts({m.num_experts})"
                                            f" < 2")
    p = m.mtp_pattern
    if p is not None and (not isinstance(p, str) or not p or set(p) - set("M*-E")):
        raise LedgerError("mtp_pattern", f"must be letters M, *, - and E, got {p!r}")
    if p and "E" in p and not m.is_moe:
        raise LedgerError("mtp_pattern", f"{p!r} has an MoE layer E but num_experts"
                                         f"({m.num_experts}) < 2")


def _check_router_groups(m) -> None:
    """Group-limited routing (transformers DeepseekV3TopkRouter, modeling_deepseek_v3.py
    L128-143; Megatron moe_router_num_groups / moe_router_group_topk): equal groups of
    experts, a token picks router_group_topk of them."""
    g, k = m.router_groups, m.router_group_topk
    if g < 1 or m.num_experts % g:
        raise LedgerError("router_groups", f"router_groups({g}) must divide "
                                           f"num_experts({m.num_experts})")
    if not 1 <= k <= g:
        raise LedgerError("router_group_topk", f"router_group_topk({k}) must lie in "
                                               f"[1, router_groups({g})]")


_RECORDS = {"mamba": (Mamba, "mamba"), "attention+mamba": (Mamba, "mamba"),
            "linear": (LinearAttention, "linear"), "conv": (ShortConv, "conv")}


def check_stack(m) -> None:
    """A hybrid stack: one known mixer per layer, each recurrent one with its record
    (``ledger.anatomy.mixers``), MLP-free layers by index; a DSA indexer on MLA's query latent."""
    if m.mixers is not None:
        if not isinstance(m.mixers, tuple) or len(m.mixers) != m.layers:
            raise LedgerError("mixers", f"must name one mixer per layer ({m.layers}), got "
                                        f"{m.mixers!r}")
        bad = [x for x in m.mixers if x not in MIXERS]
        if bad:
            raise LedgerError("mixers", f"{bad[0]!r} is not one of {', '.join(MIXERS)}")
    used = set(m.mixers or ("attention",))
    for mixer, (cls, field) in _RECORDS.items():
        record = getattr(m, field)
        if mixer in used and not isinstance(record, cls):
            raise LedgerError(field, f"layers of mixer {mixer!r} need a {cls.__name__} "
                                     f"record, got {record!r}")
    for field in ("mamba", "linear", "conv"):
        if getattr(m, field) is not None and not any(_RECORDS[x][1] == field for x in used
                                                      if x in _RECORDS):
            raise LedgerError(field, f"is set but no layer runs it (mixers {m.mixers!r})")
    _indices(m, "no_mlp_layers")
    if m.global_attention is not None and not isinstance(m.global_attention, GlobalAttention):
        raise LedgerError("global_attention", f"must be a GlobalAttention, got "
                                              f"{m.global_attention!r}")
    empty = [i for i in (m.no_mlp_layers or ()) if m.mixers and m.mixers[i] == "none"]
    if empty:
        raise LedgerError("no_mlp_layers", f"layer {empty[0]} has neither a mixer nor an MLP")
    if m.index_heads or m.index_head_dim or m.index_topk:
        for f in ("index_heads", "index_head_dim", "index_topk"):
            require_positive(f, getattr(m, f))
        if m.attention not in ("mla", "csa") or m.q_lora_rank is None:
            raise LedgerError("index_heads", "the lightning indexer reads MLA's query latent:"
                                             " needs attention='mla' with a q_lora_rank")
