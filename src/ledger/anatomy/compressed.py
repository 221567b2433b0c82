"""DeepSeek-V4's attention and residual stream: what its layers hold, counted exactly.

DeepSeek-V4 (transformers 5.23.0 ``models/deepseek_v4/modeling_deepseek_v4.py``, cited by
line below as ``v4:L``) changes three things a ModelSpec otherwise describes:

- **Attention** (``CompressedAttention``, ``ModelSpec.attention == "csa"``): one shared
  K=V head of ``head_dim`` (MQA, v4:L766-810) over a sliding window of the last tokens,
  to which a layer with a compressor adds compressed entries: every ``ratio`` tokens pooled
  into one (v4:L373-454, L600-713). The compress ratio is per layer
  (``compress_ratios``): 0 the window alone, 4 compressed sparse attention (CSA: two
  overlapping series, a lightning indexer picking ``index_topk`` entries per query,
  v4:L457-597), 128 heavily compressed attention (HCA: every entry, no indexer). Queries
  come through a low-rank latent (q_a, q_b); the output through a grouped low-rank
  projection, ``o_groups`` blocks of heads x head_dim / g -> ``o_lora_rank`` then one
  g x o_lora_rank -> hidden (v4:L314-343, L803-806, L881-883); one sink logit per head.
- **Manifold-constrained hyper-connections** (mHC, ``ModelSpec.hc_mult``): the residual is
  ``hc_mult`` streams of width hidden; before each block a projection of the flattened
  streams (n h -> (2 + n) n, with a bias and three scales) gives the weights that collapse
  them into the block's input, expand its output and mix the streams (v4:L887-998); a head
  collapses them before the final norm (n h -> n, v4:L1001-1017). Megatron-Core's
  HyperConnectionModule is the same (megatron/core/transformer/hyper_connection.py
  L169-193 @ d98e8a64: mapping_proj n h -> n^2 + 2n, a bias, alpha_pre/post/res), two per
  layer (transformer_layer.py L1684-1692), its streams averaged at the end instead
  (``ModelSpec.hc_head`` False; ``--enable-mhc-connections`` in a launch).
- **Hash-routed first layers** (``mlp_layer_types`` "hash_moe", v4:L1100-1128): the
  experts a token visits come from a frozen token-id table (a buffer, not a parameter), but
  the router's learned weight still scores them - the same h x E GEMM and parameters as a
  learned router (the ``ModelSpec`` fields price nothing else for them).

Each function takes the spec (``m``) and returns element counts; ``ledger.anatomy.counts``
adds them to a layer's attention and to the model's ``hyper_connections`` term.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError, require_positive

# transformers' layer types by ratio (configuration_deepseek_v4.py L28-32): 4 is CSA (with
# the indexer), 128 HCA, 0 the window alone
INDEXED_RATIO = 4
RATIOS = (0, INDEXED_RATIO, 128)


@dataclass(frozen=True, kw_only=True)
class CompressedAttention:
    """DeepSeek-V4's per-layer compression and its grouped output projection."""

    ratios: tuple[int, ...]  # per layer: 0, 4 (CSA) or 128 (HCA)
    o_groups: int  # g blocks of heads in the output projection
    o_lora_rank: int  # each block's width after o_a

    def __post_init__(self) -> None:
        require_positive("o_groups", self.o_groups)
        require_positive("o_lora_rank", self.o_lora_rank)
        if not isinstance(self.ratios, tuple) or any(r not in RATIOS for r in self.ratios):
            raise LedgerError("compress_ratios", f"must list one of {RATIOS} per layer, got "
                                                 f"{self.ratios!r}")


def check(m) -> None:
    """A csa model: its record, one ratio per layer, heads splitting into the groups, a
    query latent (the indexer reads it)."""
    c = m.compressed
    if m.attention != "csa":
        if c is not None:
            raise LedgerError("compressed", "is set but attention is not 'csa'")
        return
    if not isinstance(c, CompressedAttention):
        raise LedgerError("compressed", f"attention 'csa' needs its per-layer compress "
                                        f"ratios and grouped output projection (ratios=, "
                                        f"o_groups=, o_lora_rank=), got {c!r}")
    if len(c.ratios) != m.layers:
        raise LedgerError("compress_ratios", f"must give one ratio per layer ({m.layers}), "
                                             f"got {len(c.ratios)}")
    if m.heads % c.o_groups:
        raise LedgerError("o_groups", f"heads({m.heads}) must split into o_groups"
                                      f"({c.o_groups})")
    if m.q_lora_rank is None:
        raise LedgerError("q_lora_rank", "DeepSeek-V4's queries run through a latent: needs "
                                         "a q_lora_rank")
    if m.sliding_window is None or m.local_layers is not None:
        raise LedgerError("sliding_window", "every DeepSeek-V4 layer attends its window: needs "
                                            "a sliding_window on every layer")
    if INDEXED_RATIO in c.ratios and not m.index_heads:
        raise LedgerError("index_heads", f"layers of compress ratio {INDEXED_RATIO} run the "
                                         f"lightning indexer: needs index_heads, "
                                         f"index_head_dim and index_topk")
    if INDEXED_RATIO not in c.ratios and (m.index_heads or m.index_head_dim or m.index_topk):
        raise LedgerError("index_heads", f"only layers of compress ratio {INDEXED_RATIO} run "
                                         f"the lightning indexer and the ratios name none: "
                                         f"drop index_heads, index_head_dim and index_topk")
    _check_fixed(m)


# what DeepSeek-V4's attention fixes, which its counts and FLOPs therefore do not read: one
# K=V head (v4:L790), projections without biases (q_a/q_b/kv_proj/o_a/o_b, v4:L797-806),
# its own q_a/kv norms and no q/k norm, gate, second softmax map or score cap (v4:L766-883),
# one sink logit per head (v4:L807), a window on every layer (not chunks)
_FIXED = (("kv_heads", 1, "one K=V head"), ("v_head_dim", None, "V = K, head_dim wide"),
          ("qkv_bias", False, "no projection biases"), ("out_bias", False, "no output bias"),
          ("qk_norm", "none", "its own q_a / kv norms, no q/k norm"),
          ("attn_gate", "none", "no output gate"), ("diff_attention", False, "one softmax"),
          ("attn_logit_softcap", 0.0, "no score cap"),
          ("attention_sinks", True, "one sink logit per head"),
          ("local_attention", "sliding", "a sliding window"))


def _check_fixed(m) -> None:
    """A field csa's counts and FLOPs do not read, set to what DeepSeek-V4 is not, is refused
    naming it rather than dropped."""
    for field, want, why in _FIXED:
        got = getattr(m, field)
        want = m.head_dim if field == "v_head_dim" else want  # ModelSpec fills None in
        if got != want:
            raise LedgerError(field, f"DeepSeek-V4's attention ('csa') has {why}: needs "
                                     f"{field} {want!r}, got {got!r}")


def _nf(m) -> int:
    return 1 if m.norm_weights else 0


def core_weights(m) -> int:
    """Weights a token multiplies in the attention every layer shares: q_a (h -> r_q), q_b
    (r_q -> heads x d), kv_proj (h -> d), o_a (g blocks of heads d / g -> o_lora, heads x d
    x o_lora in all) and o_b (g o_lora -> h) (v4:L797-806)."""
    h, r_q, d, c = m.hidden, m.q_lora_rank, m.head_dim, m.compressed
    return h * r_q + r_q * m.heads * d + h * d + m.heads * d * c.o_lora_rank \
        + c.o_groups * c.o_lora_rank * h


def compressor_weights(m, ratio: int) -> int:
    """Weights a token multiplies in a layer's compressor and indexer: kv_proj and
    gate_proj, h -> d (HCA, v4:L399-400) or h -> 2d (CSA's two series, v4:L627-628); the
    indexer's own pair at its head width, its q_b (r_q -> heads_I x d_I) and weights_proj
    (h -> heads_I) (v4:L464, L510-514)."""
    if not ratio:
        return 0
    h, ih, ihd = m.hidden, m.index_heads, m.index_head_dim
    if ratio != INDEXED_RATIO:
        return 2 * h * m.head_dim
    return 2 * h * 2 * m.head_dim + 2 * h * 2 * ihd + m.q_lora_rank * ih * ihd + h * ih


def attention_params(m, ratio: int) -> tuple[int, int]:
    """(split by TP, replicated) parameters of one attention block with compress ``ratio``.

    Counted as transformers builds them: the projections (``core_weights``,
    ``compressor_weights``), q_a_norm (r_q) and kv_norm (d) with weights (q_b_norm is
    unweighted, v4:L798-802), the sinks (heads, v4:L807); a compressor's position_bias
    (ratio x its width) and kv_norm (d), the indexer's (ratio x 2 d_I, d_I). The split is
    MLA's in Megatron-Core (the up projection q_b and the output o_a / o_b split, the rest
    whole: gpt_layer_specs.py:105-128 @ d98e8a64): Megatron-Core d98e8a64 has no DeepSeek-V4
    attention, and transformers keeps it whole on every rank
    (configuration_deepseek_v4.py L114-121); the published runs are TP 1.
    """
    h, r_q, d, c, nf = m.hidden, m.q_lora_rank, m.head_dim, m.compressed, _nf(m)
    split = r_q * m.heads * d + m.heads * d * c.o_lora_rank + c.o_groups * c.o_lora_rank * h
    repl = h * r_q + nf * r_q + h * d + nf * d + m.heads
    if ratio:
        width = 2 * d if ratio == INDEXED_RATIO else d
        repl += compressor_weights(m, ratio) + ratio * width + nf * d
        if ratio == INDEXED_RATIO:
            repl += ratio * 2 * m.index_head_dim + nf * m.index_head_dim
    return split, repl


def hc_site(m) -> int:
    """One mHC site: fn ((2 + n) n x n h), base ((2 + n) n) and 3 scales (v4:L946-952)."""
    n = m.hc_mult
    return (2 + n) * n * (n * m.hidden + 1) + 3 if n else 0


def hc_layer(m) -> int:
    """A layer's two mHC sites, before attention and before the MLP (v4:L1172-1173)."""
    return 2 * hc_site(m)


def hc_head(m) -> int:
    """The head collapsing the streams before the final norm: hc_fn (n x n h), hc_base (n),
    hc_scale (1) (v4:L1009-1011); none where the streams are averaged (``hc_head`` False:
    Megatron-Core's output_contract, hyper_connection.py L517-534 @ d98e8a64)."""
    n = m.hc_mult
    return n * n * m.hidden + n + 1 if n and m.hc_head else 0


def hc_weights(m) -> int:
    """Weights a token multiplies in one layer's mHC projections: two n h -> (2 + n) n
    (the mixing of the streams themselves, n x n per element, is elementwise work)."""
    n = m.hc_mult
    return 2 * (2 + n) * n * n * m.hidden if n else 0
