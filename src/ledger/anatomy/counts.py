"""Exact parameter counts of a ModelSpec, one term each, split as Megatron-Core splits them.

Kept apart from ``ledger.model`` so the record stays short: every function takes the spec
(``m``) and returns element counts; ``ParamCounts`` (which ``ModelSpec`` inherits) asks
them of the spec itself (``m.params``, ``m.breakdown``, ``m.layer_params(kind)``). A layer's count is that of its kind
(``ledger.anatomy.mixers.LayerKind``): its sequence mixer, its norms, its MLP; the rest of the
model is the embedding (with a learned position table and an embedding norm, on the first
pipeline stage) and the final norm and output layer (on the last).
"""
from __future__ import annotations

from functools import cached_property, lru_cache

from ledger.anatomy import compressed
from ledger.anatomy.mixers import LayerKind


def mlp(m, width: int, h: int | None = None) -> int:
    """One MLP of ``width`` on ``h``-wide rows (default hidden): gate, up and down (SwiGLU)
    or up and down, their biases."""
    h = m.hidden if h is None else h
    matrices = 3 if m.gated_mlp else 2
    bias = ((matrices - 1) * width + h) if m.mlp_bias else 0
    return matrices * h * width + bias


def latent_proj(m) -> int:
    """LatentMoE's two projections around the routed experts, hidden -> latent before the
    dispatch and latent -> hidden after the combine, with their biases: Megatron-Core's
    fc1_latent_proj / fc2_latent_proj, TELinear in "duplicated" mode - whole on every TP
    rank (megatron/core/transformer/moe/moe_layer.py:265-304 at d98e8a64dd); transformers'
    NemotronHMoE (modeling_nemotron_h.py:733-739 in 5.23.0, bias=mlp_bias)."""
    lat = m.moe_latent
    return 0 if not lat else 2 * m.hidden * lat + (lat + m.hidden) * m.mlp_bias


def norm_size(m) -> int:
    """Parameters of one norm of width hidden: a weight, and for LayerNorm a bias."""
    if not m.norm_weights:
        return 0
    return m.hidden * (2 if m.norm == "layernorm" else 1)


def _norm_factor(m) -> int:
    return 0 if not m.norm_weights else 2 if m.norm == "layernorm" else 1


def attention_parts(m) -> tuple[int, int]:
    """(split by TP, replicated) parameters of one attention block.

    MHA/GQA: q, k, v, o (+ biases); Megatron splits q/k/v/o and the q/k/v biases,
    replicates the output bias. MLA (DeepSeek-V2 sec. 2.1, modeling_deepseek_v3.py
    :371-404): q_a (h x q_lora) + its norm + q_b (q_lora x heads*(nope+rope)), or a plain
    q_proj; kv_a (h x kv_lora+rope) + its norm; kv_b (kv_lora x heads*(nope+v)); o.
    Megatron-Core keeps the down projections (``backend.linear()``, TE's "duplicated"
    mode) and the latent norms whole on every TP rank and splits the up projections
    and o (megatron/core/models/gpt/gpt_layer_specs.py:105-128 at d98e8a64dd). An output
    gate (``attn_gate``) is split like q; DiffLlama's lambdas and a DSA indexer are kept
    whole (``extras``).
    """
    h, heads, nf = m.hidden, m.heads, _norm_factor(m)
    o = heads * m.v_head_dim * h
    gate = attention_gate(m)
    split_x, repl_x = attention_extras(m)
    if m.attention == "mla":
        r_q, r_kv, rope = m.q_lora_rank, m.kv_lora_rank, m.qk_rope_head_dim
        kv_a = h * (r_kv + rope) + (r_kv + rope) * m.qkv_bias + nf * r_kv
        kv_b = r_kv * heads * (m.qk_nope_head_dim + m.v_head_dim)
        if r_q is None:
            return h * m.q_dim + kv_b + o + gate + split_x, kv_a + h * m.out_bias + repl_x
        q_a = h * r_q + r_q * m.qkv_bias + nf * r_q
        return (r_q * m.q_dim + kv_b + o + gate + split_x,
                q_a + kv_a + h * m.out_bias + repl_x)
    kv = m.kv_dim + m.kv_heads * m.v_head_dim  # K and V (MiMo's V heads are narrower)
    split = h * m.q_dim + h * kv + o + gate + split_x
    split += (m.q_dim + kv) * m.qkv_bias + heads * m.attention_sinks
    qk_norm = {"none": 0, "head": 2 * m.head_dim, "full": m.q_dim + m.kv_dim}
    if m.qk_norm == "full":  # OLMo 2's norm weights follow the sharded channels
        return split + nf * qk_norm["full"], h * m.out_bias + repl_x
    return split, h * m.out_bias + nf * qk_norm[m.qk_norm] + repl_x


def attention_gate(m) -> int:
    """An output gate on attention: sigmoid(x W) x the attention output, per channel
    (``elementwise``: Qwen3-Next's doubled q_proj, modeling_qwen3_next.py:241-243; AFMoE's
    gate_proj) or per head (``head``: Laguna's g_proj), with Beam's bias per head."""
    width = {"none": 0, "elementwise": m.heads * m.head_dim, "head": m.heads}[m.attn_gate]
    return m.hidden * width + m.heads * m.attn_gate_bias


def attention_extras(m) -> tuple[int, int]:
    """(split, replicated) of the small attention terms: DiffLlama's four lambda vectors
    of head_dim (modeling_diffllama.py:238-241) and DeepSeek-V3.2's lightning indexer
    (modeling_deepseek_v32.py:175: wq_b q_lora -> heads x dim, wk h -> dim, a LayerNorm of
    dim with its bias, weights_proj h -> heads), kept whole on every TP rank."""
    diff = 4 * m.head_dim * m.diff_attention
    ih, d = m.index_heads, m.index_head_dim
    index = ((m.q_lora_rank or 0) * ih * d + m.hidden * d + 2 * d + m.hidden * ih) if ih else 0
    return 0, diff + index


def mlp_parts(m, width: int) -> tuple[int, int]:
    """(split, replicated) of one MLP: gate/up are column-parallel with their biases,
    down is row-parallel and its bias replicated (Megatron ParallelMLP); BitNet's norm
    before down_proj and an activation's learned scalars replicated."""
    whole = mlp(m, width)
    down_bias = m.hidden * m.mlp_bias
    return whole - down_bias, down_bias + m.act_params + width * m.sub_norms


_RECURRENT = {"mamba": "ssm", "attention+mamba": "ssm", "linear": "linear_attention",
              "conv": "conv"}  # mixer -> its breakdown entry


def _record(m, mixer: str):
    """The ``ledger.anatomy.mixers`` record of a recurrent mixer."""
    return m.mamba if "mamba" in mixer else getattr(m, mixer)


def layer_norms(m, kind: LayerKind) -> int:
    """Norms of width hidden in a layer of ``kind``: ``layer_norms`` for a mixer and an
    MLP; half of them when the layer has only one of the two (a Mamba block, Nemotron-H's
    mixer-only and MLP-only layers keep one norm, a sandwich two)."""
    both = kind.mixer != "none" and kind.mlp != "none"
    return m.layer_norms if both else m.layer_norms // 2


def kind_params(m, kind: LayerKind) -> tuple[int, int, int]:
    """(split by TP, replicated across TP, routed experts) parameters of one layer.

    Megatron shards the attention and MLP matrices (and the column-parallel biases)
    across the TP group and replicates the norms, the row-parallel biases and the
    router; routed experts are split across tp x ep. Mixers as ``ledger.anatomy.mixers`` says.
    Kept per (model, kind): the planner asks it once per stage layout.
    """
    try:
        return _kind_params(m, kind)
    except TypeError:  # a model with a field that does not hash
        return _kind_params.__wrapped__(m, kind)


@lru_cache(maxsize=1024)
def _kind_params(m, kind: LayerKind) -> tuple[int, int, int]:
    parts = kind_parts(m, kind).values()
    return tuple(sum(p[i] for p in parts) for i in range(3))


def kind_parts(m, kind: LayerKind) -> dict[str, tuple[int, int, int]]:
    """``kind_params`` by component (the keys of ``breakdown``): the attention block and a
    recurrent mixer (ssm, linear_attention, conv), the norms, the dense MLP or the MoE
    block's shared experts (with Qwen2-MoE's gate), router and routed experts."""
    out: dict[str, tuple[int, int, int]] = {}
    if kind.attention and m.attention == "csa":  # DeepSeek-V4: by the layer's compression
        out["attention"] = (*compressed.attention_params(m, kind.compress), 0)
    elif kind.attention:  # as the layer attends (a global layer's own shape); BitNet's norm
        split, repl = attention_parts(m.attention_of(kind))  # before o_proj with it
        out["attention"] = (split, repl + m.hidden * m.sub_norms * (kind.mixer == "attention"),
                            0)
    if m.hc_mult:  # mHC: its two sites, whole on every TP rank (hyper_connection.py L205-215)
        out["hyper_connections"] = (0, compressed.hc_layer(m), 0)
    if kind.mixer in _RECURRENT:
        out[_RECURRENT[kind.mixer]] = (*_record(m, kind.mixer).parts(m.hidden), 0)
    out["norms"] = (0, layer_norms(m, kind) * norm_size(m) + m.hidden * m.moe_norm * kind.moe,
                    0)
    if kind.mlp == "dense":
        return out | {"mlp": (*mlp_parts(m, m.ffn_hidden), 0)}
    if kind.mlp == "none":
        return out
    h, e = m.hidden, m.num_experts
    split, repl = mlp_parts(m, m.shared_ffn) if m.shared_experts else (0, 0)
    latent = {"latent_proj": (0, latent_proj(m), 0)} if m.moe_latent else {}
    return out | {"shared_experts": (split, repl + h * m.shared_expert_gate, 0),
                  "router": (0, h * e + e * m.router_bias, 0), **latent,
                  "experts": (0, 0, e * mlp(m, m.moe_ffn_hidden, m.expert_hidden))}


def first_stage_params(m) -> int:
    """Outside the layers, on the first pipeline stage: the embedding (its rows), a learned
    position table, a norm on the embedding output (BLOOM)."""
    return m.embedding_rows * m.hidden + m.learned_positions * m.hidden \
        + m.embedding_norm * norm_size(m)


def last_stage_params(m) -> int:
    """Outside the layers, on the last stage: the final norm and the output layer (none of
    its own when tied) with its bias."""
    out = 0 if m.tied_embeddings else m.vocab * m.hidden
    return m.final_norm * norm_size(m) + out + m.vocab * m.lm_head_bias + compressed.hc_head(m)


def breakdown(m) -> dict[str, int]:
    """Exact parameter count per component; the values sum to ``m.params``.

    ``attention`` holds the attention projections, their biases, q/k or latent norms,
    sinks, gates and indexers; ``ssm``, ``linear_attention`` and ``conv`` the recurrent
    mixers (present only when the model has them); ``shared_experts`` the shared MLP and
    its gate; ``router`` its weight and bias; ``mlp`` the dense MLPs (with BitNet's sub-norm
    and an activation's scalars). DeepSeek-V3's MTP modules are not here (transformers
    does not build them): see ``mtp_params``.
    """
    h, nsize = m.hidden, norm_size(m)
    out = dict.fromkeys(("embedding", "positions", "attention", "mlp", "experts",
                         "shared_experts", "router", "norms", "output"), 0)
    extra = dict.fromkeys(("ssm", "linear_attention", "conv", "latent_proj",
                           "hyper_connections"), 0)
    out["embedding"] = m.embedding_rows * h
    out["positions"] = m.learned_positions * h
    out["norms"] = (m.embedding_norm + m.final_norm) * nsize
    out["output"] = (0 if m.tied_embeddings else m.vocab * h) + m.vocab * m.lm_head_bias
    extra["hyper_connections"] = compressed.hc_head(m)  # with the layers' sites below
    for kind, n in m.kind_counts.items():
        for key, part in kind_parts(m, kind).items():
            (extra if key in extra else out)[key] += n * sum(part)
    ordered = {}
    for key, value in out.items():  # the recurrent mixers and mHC beside attention,
        ordered[key] = value  # LatentMoE's projections beside the routed experts
        if key in ("attention", "experts"):
            ordered |= {k: v for k, v in extra.items() if v and (k == "latent_proj") ==
                        (key == "experts")}
    return ordered


# Megatron's hybrid layer letters (megatron/core/models/hybrid/hybrid_layer_allocation.py
# at d98e8a64dd: M Mamba, * attention, - MLP, E MoE), each one mixer or one MLP alone
PATTERN = {"M": LayerKind("mamba", "none"), "*": LayerKind("attention", "none"),
           "-": LayerKind("none", "dense"), "E": LayerKind("none", "moe")}


def mtp_kinds(m) -> tuple[LayerKind, ...]:
    """The layers one MTP depth runs: its ``mtp_pattern`` letters (Nemotron 3's "*E": an
    attention layer, then an MoE layer - config.json mtp_hybrid_override_pattern), or one
    transformer block of the stack's MLP (DeepSeek-V3: an MoE layer, as layer 61 of the
    released checkpoint is)."""
    if m.mtp_pattern is None:
        return (LayerKind("attention", "moe" if m.is_moe else "dense"),)
    return tuple(PATTERN[c] for c in m.mtp_pattern)


def mtp_sets(m) -> int:
    """MTP blocks with weights of their own: one per depth, or one for all of them when
    the depths repeat one block (Megatron ``mtp_use_repeated_layer``: one layer spec for
    every depth, megatron/core/models/gpt/gpt_layer_specs.py:779-782 at d98e8a64dd)."""
    return min(m.mtp_layers, 1) if m.mtp_shared else m.mtp_layers


def mtp_params(m) -> int:
    """The multi-token-prediction blocks (DeepSeek-V3 report sec. 2.2, fig. 3; Megatron-Core
    MultiTokenPredictionLayer): each has a projection (h x 2h), two RMSNorms on its inputs,
    its layers (``mtp_kinds``) and the final norm of its shared head; embedding and output
    head are shared with the main model, so not counted. Shared blocks count once
    (``mtp_sets``)."""
    if not m.mtp_layers:
        return 0
    block = sum(sum(kind_params(m, k)) for k in mtp_kinds(m))
    return mtp_sets(m) * (2 * m.hidden * m.hidden + block + 3 * norm_size(m))


class ParamCounts:
    """The parameter counts a ``ModelSpec`` answers (it inherits them): each one of the
    functions above, applied to the spec itself."""

    @property
    def norm_size(self) -> int:
        """Parameters of one norm: a weight, and for LayerNorm a bias."""
        return norm_size(self)

    @cached_property
    def breakdown(self) -> dict[str, int]:
        """Exact parameter count per component (``breakdown`` above)."""
        return breakdown(self)

    @cached_property
    def params(self) -> int:
        return sum(self.breakdown.values())

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters: the share that expert parallelism splits."""
        return self.breakdown["experts"]

    @property
    def active_params(self) -> float:
        """Parameters one token touches: everything dense, the shared experts, and of the
        routed experts top_k / num_experts (DeepSeek-V3: 37B of 671B, report abstract)."""
        if not self.is_moe:
            return float(self.params)
        return self.params - self.expert_params * (1 - self.top_k / self.num_experts)

    @property
    def mtp_kinds(self) -> tuple[LayerKind, ...]:
        """The layers one MTP depth runs (``mtp_kinds`` above)."""
        return mtp_kinds(self)

    @property
    def mtp_params(self) -> int:
        """DeepSeek-V3's multi-token-prediction modules (``mtp_params`` above)."""
        return mtp_params(self)

    def layer_params(self, moe: bool | LayerKind) -> tuple[int, int, int]:
        """(split by TP, replicated across TP, routed experts) parameters of one layer: an
        attention layer with an MoE (``moe``) or dense MLP, or a layer of any ``LayerKind``
        (``kind_params`` above)."""
        kind = moe if isinstance(moe, LayerKind) else LayerKind(
            "attention", "moe" if moe else "dense")
        return kind_params(self, kind)

    def layer_parts(self, moe: bool | LayerKind) -> dict[str, tuple[int, int, int]]:
        """``layer_params`` by component (the keys of ``breakdown``): attention or the
        recurrent mixer, norms, and the dense MLP or the MoE block's shared experts (with
        Qwen2-MoE's gate), router and routed experts - what freezing by module kind
        selects (``kind_parts`` above)."""
        kind = moe if isinstance(moe, LayerKind) else LayerKind(
            "attention", "moe" if moe else "dense")
        return kind_parts(self, kind)

    @property
    def first_stage_params(self) -> int:
        """Outside the layers, with the embedding: the table, positions, embedding norm."""
        return first_stage_params(self)

    @property
    def last_stage_params(self) -> int:
        """Outside the layers, with the output: the final norm, the output layer, its bias."""
        return last_stage_params(self)
