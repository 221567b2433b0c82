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
"""
from __future__ import annotations

from ledger.model import ModelSpec


def attention_matmul_params(model: ModelSpec) -> int:
    """Weights of one layer's attention projections (no biases, norms or sinks)."""
    h, heads = model.hidden, model.heads
    o = heads * model.v_head_dim * h
    if model.attention == "mla":
        r_q, r_kv = model.q_lora_rank, model.kv_lora_rank
        q = h * model.q_dim if r_q is None else h * r_q + r_q * model.q_dim
        kv = h * (r_kv + model.qk_rope_head_dim) \
            + r_kv * heads * (model.qk_nope_head_dim + model.v_head_dim)
        return q + kv + o
    return h * model.q_dim + 2 * h * model.kv_dim + o


def matmul_params_per_token(model: ModelSpec) -> float:
    """Weights one token multiplies: attention and MLP matrices, the top-k routed experts
    and the shared ones (with Qwen2-MoE's shared gate), the router and the output layer.
    Not the embedding lookup, the norms or the biases (elementwise work)."""
    h, matrices = model.hidden, 3 if model.gated_mlp else 2
    n_moe = model.moe_layers
    dense = (model.layers - n_moe) * matrices * h * model.ffn_hidden
    per_expert = matrices * h * model.moe_ffn_hidden
    moe = n_moe * (model.top_k * per_expert + matrices * h * model.shared_ffn
                   + h * model.num_experts + h * model.shared_expert_gate)
    return model.layers * attention_matmul_params(model) + dense + moe + model.vocab * h


def mean_keys(model: ModelSpec, layer: int, causal: bool = True) -> float:
    """Mean keys a query of ``layer`` attends over the run's sequence (module docstring)."""
    s, w = model.seq_len, model.window(layer)
    if w is None or w >= s:
        keys = s / 2
    elif model.local_attention == "sliding":
        keys = w - w * w / (2 * s)
    else:
        n, r = divmod(s, w)
        keys = (n * w * w + r * r) / (2 * s)
    return keys if causal else 2 * keys


def keys_factor(model: ModelSpec) -> float:
    """Mean over layers of the causal keys a query sees, relative to a global layer's s/2:
    1.0 without local layers; the factor a time model scales its causal attention by."""
    if model.sliding_window is None:
        return 1.0
    return sum(mean_keys(model, i) for i in range(model.layers)) / (model.layers
                                                                    * model.seq_len / 2)


def attention_flops_per_token(model: ModelSpec, causal: bool = True) -> float:
    """Attention-core FLOPs per token, forward and backward, summed over layers."""
    per_key = 2 * model.heads * (model.head_dim + model.v_head_dim)
    if model.sliding_window is None:  # every layer global: one term
        return 3 * per_key * model.layers * mean_keys(model, 0, causal)
    return 3 * per_key * sum(mean_keys(model, i, causal) for i in range(model.layers))


def model_flops_per_token(model: ModelSpec, causal: bool = True) -> float:
    """6 N_matmul + the attention core over the keys each layer sees (module docstring).
    For a global-attention MHA model this is PaLM's 6 N + 6 l s q_dim (12 l s q_dim
    with ``causal=False``)."""
    return 6 * matmul_params_per_token(model) + attention_flops_per_token(model, causal)
