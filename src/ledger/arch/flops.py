"""Model FLOPs per token, architecture by architecture.

    model FLOPs / token = 6 N_matmul + sum over layers l of 3 * 2 * keys(l) * heads * (d_qk + d_v)

6 = 2 (multiply-add) x 3 (one forward, two backward matmuls) and N_matmul the weights a
token multiplies; per layer the attention core's forward is 2 keys(l) heads (d_qk + d_v)
(QK^T over the query/key head width, AV over the value head width), times 3 for forward
and backward (PaLM, Chowdhery et al. 2022, app. B).
keys(l) is the mean number of keys a query attends, under the causal mask:

  global layer        s / 2                         (PaLM counts s: ``causal=False``)
  sliding window w    w - w^2 / (2 s)   (w < s)     each query sees at most w keys
                                                    (Mistral 7B, Jiang et al. 2023, sec. 2;
                                                    Gemma 2 report sec. 2; gpt-oss card)
  chunks of c         (n c^2 + r^2) / (2 s), s = n c + r   a query sees its own chunk only
                                                    (Llama 4, modeling_llama4.py chunked mask)

each equal to s / 2 when the window covers the sequence. ``causal=False`` doubles
every term (the masked keys counted too, as PaLM and Narayanan et al. 2021 eq. 3 do).
MLA (DeepSeek-V2 sec. 2.1): d_qk = qk_nope + qk_rope, d_v = v_head_dim, and N_matmul
holds its down and up projections as trained (no weight absorption).
DeepSeek-V4 (``ledger.anatomy.compressed``): a layer's keys are its window's plus the
compressed entries its query may read (``compressed_keys``: all of them under HCA, the
indexer's top-k under CSA), at d_qk = d_v = head_dim (one K=V head); a CSA layer's
indexer adds 2 d_I per indexer head over every compressed entry its query may read; N_matmul
holds the compressors', the indexer's and the mHC projections' weights.
"""
from __future__ import annotations

from ledger.arch.recurrent import core_flops_per_token, projection_weights
from ledger.anatomy import compressed
from ledger.anatomy.mixers import LayerKind
from ledger.model import ModelSpec


def attention_matmul_params(model: ModelSpec, compress: int = 0) -> int:
    """Weights of one layer's attention projections (no biases, norms or sinks), with an
    output gate's (``attn_gate``) and a DSA indexer's projections (wq_b, wk, weights_proj);
    DeepSeek-V4's by the layer's ``compress`` ratio (``ledger.anatomy.compressed``)."""
    if model.attention == "csa":
        return compressed.core_weights(model) + compressed.compressor_weights(model, compress)
    h, heads = model.hidden, model.heads
    o = heads * model.v_head_dim * h
    gate = h * {"none": 0, "elementwise": model.q_dim, "head": heads}[model.attn_gate]
    ih, ihd = model.index_heads, model.index_head_dim
    index = ((model.q_lora_rank or 0) * ih * ihd + h * ihd + h * ih) if ih else 0
    if model.attention == "mla":
        r_q, r_kv = model.q_lora_rank, model.kv_lora_rank
        q = h * model.q_dim if r_q is None else h * r_q + r_q * model.q_dim
        kv = h * (r_kv + model.qk_rope_head_dim) \
            + r_kv * heads * (model.qk_nope_head_dim + model.v_head_dim)
        return q + kv + o + gate + index
    return h * model.q_dim + h * model.kv_dim + h * model.kv_heads * model.v_head_dim + o \
        + gate + index


def mixer_matmul_params(model: ModelSpec, mixer: str, compress: int = 0) -> float:
    """Weights a token multiplies in a layer's sequence mixer: attention's projections, a
    recurrent mixer's (``ledger.arch.recurrent.projection_weights``), or both side by side;
    with mHC, its two projections."""
    attn = attention_matmul_params(model, compress) \
        if mixer in ("attention", "attention+mamba") else 0
    return attn + projection_weights(model, mixer) + compressed.hc_weights(model)


def layer_matmul_params(model: ModelSpec, kind: LayerKind) -> float:
    """Weights one token multiplies in a layer of ``kind``: its mixer's, its dense MLP's,
    or of its MoE block the top-k routed experts (at the latent width under LatentMoE, with
    its two projections), the shared ones (with Qwen2-MoE's shared gate) and the router."""
    h, matrices = model.hidden, 3 if model.gated_mlp else 2
    lat = getattr(model, "moe_latent", None)  # LatentMoE: hidden -> latent -> hidden
    latent = 2 * h * lat if lat else 0
    mlp = {"dense": matrices * h * model.ffn_hidden, "none": 0,
           "moe": (model.top_k * matrices * model.expert_hidden * model.moe_ffn_hidden
                   + matrices * h * model.shared_ffn + h * model.num_experts
                   + h * model.shared_expert_gate + latent)}[kind.mlp]
    return mixer_matmul_params(model.attention_of(kind), kind.mixer, kind.compress) + mlp


def matmul_params_per_token(model: ModelSpec) -> float:
    """Weights one token multiplies: every layer's (``layer_matmul_params``) and the output
    layer's. Not the embedding lookup, the norms or the biases (elementwise work)."""
    return sum(n * layer_matmul_params(model, k) for k, n in model.kind_counts.items()) \
        + model.vocab * model.hidden + model.hc_mult ** 2 * model.hidden * model.hc_head


def compressed_keys(s: int, ratio: int, cap: int | None = None) -> float:
    """Mean over a sequence's ``s`` queries of the compressed entries each may read: query
    t (0-based) reads the windows closed by then, floor((t + 1) / ratio) of them
    (modeling_deepseek_v4.py L446-453, L588-595), at most ``cap`` (CSA's top-k).

    >>> compressed_keys(8, 4)  # queries 3-6 read one entry, query 7 two
    0.75
    """
    def floor_sum(n: int) -> int:  # sum over u = 1..n of floor(u / ratio)
        q, r = divmod(n + 1, ratio)
        return ratio * q * (q - 1) // 2 + q * r
    m = None if cap is None else cap * ratio  # from u = m on, the cap binds
    if m is None or m > s:
        return floor_sum(s) / s
    return (floor_sum(m - 1) + cap * (s - m + 1)) / s


def _compressed_layer(model: ModelSpec, layer: int) -> float:
    """DeepSeek-V4: the compressed entries a query of ``layer`` attends, on top of its
    window (``compressed_keys``; CSA's capped at index_topk)."""
    ratio = model.compressed.ratios[layer]
    if not ratio:
        return 0.0
    cap = model.index_topk if ratio == compressed.INDEXED_RATIO else None
    return compressed_keys(model.seq_len, ratio, cap)


def _indexer_flops(model: ModelSpec) -> float:
    """Forward FLOPs per token of DeepSeek-V4's indexer scores: 2 d_I per indexer head over
    every compressed entry a query may read, summed over the CSA layers."""
    s, c = model.seq_len, compressed.INDEXED_RATIO
    csa = model.compressed.ratios.count(c)
    return 2 * model.index_heads * model.index_head_dim * compressed_keys(s, c) * csa


def mean_keys(model: ModelSpec, layer: int, causal: bool = True) -> float:
    """Mean keys a query of ``layer`` attends over the run's sequence (module docstring);
    under DeepSeek-V3.2's sparse attention at most ``index_topk`` of them; under
    DeepSeek-V4's its window's and the compressed entries it reads."""
    s, w = model.seq_len, model.window(layer)
    if w is None or w >= s:
        keys = s / 2
    elif model.local_attention == "sliding":
        keys = w - w * w / (2 * s)
    else:
        n, r = divmod(s, w)
        keys = (n * w * w + r * r) / (2 * s)
    if model.attention == "csa":
        keys += _compressed_layer(model, layer)
    elif model.index_topk:  # each query attends the top-k keys the indexer picks
        k = model.index_topk
        keys = keys if k >= s else (k - k * k / (2 * s))
    return keys if causal else 2 * keys


def _attending(model: ModelSpec) -> list[int]:
    return [i for i in range(model.layers) if model.layer_kind(i).attention]


def keys_factor(model: ModelSpec) -> float:
    """Mean over the attention layers of the causal keys a query sees, relative to a global
    layer's s/2: 1.0 without local layers; the factor a time model scales its causal
    attention by."""
    if model.sliding_window is None and not model.index_topk:
        return 1.0
    layers = _attending(model) or [0]
    return sum(mean_keys(model, i) for i in layers) / (len(layers) * model.seq_len / 2)


def local_keys_factor(model: ModelSpec, max_window: int) -> float:
    """The part of ``keys_factor`` that the sliding-window layers whose window is at most
    ``max_window`` keys (and shorter than the sequence) contribute: 0.0 without such
    layers; ``keys_factor`` less it is the rest of the stack's."""
    if model.sliding_window is None or model.local_attention != "sliding":
        return 0.0
    layers = _attending(model) or [0]
    local = [i for i in layers if (w := model.window(i)) and w <= max_window
             and w < model.seq_len]
    return sum(mean_keys(model, i) for i in local) / (len(layers) * model.seq_len / 2)


def attention_flops_per_token(model: ModelSpec, causal: bool = True) -> float:
    """Attention-core FLOPs per token, forward and backward, summed over the layers that
    attend; a DSA indexer adds its scores, 2 d_index per head over the causal keys."""
    per_key = 2 * model.heads * (model.head_dim + model.v_head_dim)
    index = 2 * model.index_heads * model.index_head_dim
    s = model.seq_len
    if model.sliding_window is None and not model.index_topk \
            and model.global_attention is None:  # every layer global alike: one term
        return 3 * (per_key + index) * model.attention_layers * (s / 2 if causal else s)
    layers = _attending(model)
    full = (s / 2 if causal else s) * len(layers)
    if model.attention == "csa":  # the indexer on the CSA layers only (``_indexer_flops``)
        index, full = 1.0, _indexer_flops(model) * (1 if causal else 2)
    widths = [model.attention_of(model.layer_kind(i)) for i in layers]
    return 3 * (sum(2 * m.heads * (m.head_dim + m.v_head_dim) * mean_keys(model, i, causal)
                    for i, m in zip(layers, widths)) + index * full)


def recurrent_flops_per_token(model: ModelSpec) -> float:
    """The recurrent mixers' cores, forward and backward (x 3, as Megatron counts its hybrid
    layers, megatron/training/training.py:1010 at d98e8a64), summed over their layers
    (``ledger.arch.recurrent.core_flops_per_token``)."""
    return 3 * sum(n * core_flops_per_token(model, k.mixer)
                   for k, n in model.kind_counts.items())


def model_flops_per_token(model: ModelSpec, causal: bool = True) -> float:
    """6 N_matmul + the attention core over the keys each layer sees + the recurrent
    mixers' cores (module docstring). For a global-attention MHA model this is PaLM's
    6 N + 6 l s q_dim (12 l s q_dim with ``causal=False``)."""
    return 6 * matmul_params_per_token(model) + attention_flops_per_token(model, causal) \
        + recurrent_flops_per_token(model)
