"""The GEMM weights of a layer and of the model: what a low-precision recipe quantizes
(``ledger.frameworks.fp8``). Norms, biases, sinks, the router, the embedding and the output
head are not GEMM weights here: they stay BF16 under every recipe."""
from __future__ import annotations


def gemm_weights(model, moe) -> tuple[float, float, float, int]:
    """(split by TP, replicated, routed, dense weight tensors) GEMM weights of one layer -
    the weights an FP8 recipe quantizes (each routed expert adds 2 tensors: fc1, fc2).
    Norms, biases, sinks and the router stay BF16. ``moe``: whether an attention layer's
    MLP is MoE, or the layer's ``ledger.anatomy.mixers.LayerKind`` (a recurrent mixer's in_proj and
    out_proj are its GEMMs, ``projections``; a layer without an MLP has none there)."""
    mixer, mlp = (moe.mixer, moe.mlp) if hasattr(moe, "mixer") else \
        ("attention", "moe" if moe else "dense")
    attn = model.attention_of(moe) if hasattr(moe, "mixer") else model
    split, repl, tensors = _attention_gemms(attn) if mixer in ("attention",
                                                               "attention+mamba") else (0, 0, 0)
    if mixer in ("mamba", "attention+mamba", "linear", "conv"):
        record = model.mamba if "mamba" in mixer else getattr(model, mixer)
        s, r = record.projections(model.hidden)
        split, repl, tensors = split + s, repl + r, tensors + 2
    h, mats = model.hidden, 3 if model.gated_mlp else 2
    if mlp == "dense":
        return split + mats * h * model.ffn_hidden, repl, 0, tensors + 2
    if mlp == "none":
        return split, repl, 0, tensors
    shared = mats * h * model.shared_ffn if model.shared_experts else 0
    x = getattr(model, "expert_hidden", h)  # LatentMoE: experts at the latent width, and
    routed = model.num_experts * mats * x * model.moe_ffn_hidden  # its two projections whole
    latent = 2 * h * x if x != h else 0  # on every TP rank (moe_layer.py:265-304, d98e8a64dd)
    return split + shared, repl + latent, routed, tensors + 2 * bool(shared) + 2 * bool(latent)


def _attention_gemms(model) -> tuple[float, float, int]:
    """(split, replicated, tensors) of an attention block's projections (MLA's down
    projections whole on every TP rank)."""
    h, a = model.hidden, model.heads
    o = a * model.v_head_dim * h
    if getattr(model, "attention", "mha") == "mla":
        r_q, r_kv, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
        kv_b = r_kv * a * (model.qk_nope_head_dim + model.v_head_dim)
        repl = h * (r_kv + rope)
        if r_q is None:
            return h * model.q_dim + kv_b + o, repl, 4
        return r_q * model.q_dim + kv_b + o, repl + h * r_q, 5
    return h * model.q_dim + h * model.kv_dim + h * model.kv_heads * model.v_head_dim + o, 0, 2


def gemm_params(model) -> float:
    """GEMM weights of the whole model (every layer; not embedding, output, router)."""
    return sum(n * sum(gemm_weights(model, kind)[:3]) for kind, n in model.kind_counts.items())
