"""What a per-op checkpoint policy keeps of one layer, and what one layer's backward
holds beyond what the layer saved.

torchtitan's selective op activation checkpointing (``SavedTensors.selective == "op"``)
wraps each block in a checkpoint whose policy saves the outputs of the 1st, 3rd, 5th ...
matmul it runs (a fresh counter per block), the attention kernel's output and
log-sum-exp and the outputs of TP's reduce-scatters, and recomputes everything else; the
checkpoint itself keeps the block's input. ``matmuls`` lists a layer's GEMMs in the order
its forward runs them, ``op_policy`` prices what the policy keeps, ``recomputed_share``
what it runs again.

Per token, before TP: a column-parallel GEMM's output is its width / tp, a row-parallel
one writes partial sums of the full width (the reduce-scatter comes after it), a
replicated one its width.

>>> from ledger.model import llama3_8b
>>> from ledger.arch.saved_tensors import TORCH
>>> kept = op_policy(llama3_8b(), TORCH, 2, tokens=1, tp=1, sp_div=1, moe=False)
>>> kept["input"], kept["attention"], kept["mlp"]  # x; wq, wv, SDPA out + lse; w1, w2
(8192.0, 18560.0, 36864.0)
"""
from __future__ import annotations


def matmuls(model, t, moe: bool) -> list[tuple[str, str, float, float, float]]:
    """(part, split, width, rows per token, input width) of each GEMM of one layer, in
    forward order: the attention projections (MLA's down and up projections), then the
    MLP, or the router, each routed expert (its ``t.sac_expert_mms`` GEMMs, at top_k rows
    per token) and the shared experts."""
    h, a, kv, d = model.hidden, model.heads, model.kv_heads, model.head_dim
    out_in = a * getattr(model, "v_head_dim", d)  # the output projection reads every head
    if getattr(model, "attention", "mha") == "mla":
        ql, kvl = model.q_lora_rank, model.kv_lora_rank
        q = ([("attention", "repl", ql, 1, h), ("attention", "col", model.q_dim, 1, ql)]
             if ql else [("attention", "col", model.q_dim, 1, h)])  # q_dim: heads x head_dim
        attn = q + [("attention", "repl", kvl + model.qk_rope_head_dim, 1, h),
                    ("attention", "col", a * (model.qk_nope_head_dim + model.v_head_dim), 1,
                     kvl), ("attention", "row", h, 1, a * model.v_head_dim)]
    else:
        attn = [("attention", "col", a * d, 1, h), ("attention", "col", kv * d, 1, h),
                ("attention", "col", kv * d, 1, h), ("attention", "row", h, 1, out_in)]
    if not moe:
        f = model.ffn_hidden
        ups = [("mlp", "col", f, 1, h)] * (2 if model.gated_mlp else 1)
        return attn + ups + [("mlp", "row", h, 1, f)]
    n, k, f = model.num_experts, model.top_k, model.moe_ffn_hidden
    out = attn + ([("router", "repl", n, 1, h)] if t.sac_router_mm else [])
    x = getattr(model, "expert_hidden", h)  # LatentMoE's experts work at the latent width
    if t.sac_expert_mms == 2:  # a fused gate_up projection, then down
        out += [("experts", "col", (2 if model.gated_mlp else 1) * f, k, x),
                ("experts", "row", x, k, f)]
    shared = getattr(model, "shared_ffn", model.shared_experts * f)
    if shared:
        out += [("shared", "col", shared, 1, h)] * (2 if model.gated_mlp else 1) \
            + [("shared", "row", h, 1, shared)]
    return out


def recomputed_share(model, t, moe: bool) -> float:
    """The share of one layer's GEMM FLOPs the op policy runs again in backward: its
    even-numbered GEMMs' (rows x width x input width of each)."""
    flops = [rows * width * k for _, _, width, rows, k in matmuls(model, t, moe)]
    return sum(flops[1::2]) / sum(flops)


def op_share(model, cfg) -> float | None:
    """The share of one layer's GEMM FLOPs a config's selective recompute runs again: the
    op policy's (``recomputed_share``, of the model's typical layer) where its framework's
    modules run one; None where selective means the attention core (Korthikanti)."""
    from ledger.arch.saved_tensors import table
    from ledger.frameworks import of

    if cfg.recompute != "selective":
        return None
    t = table(of(cfg).activations)
    return recomputed_share(model, t, model.is_moe) if t.selective == "op" else None


def op_policy(model, t, e, *, tokens, tp, sp_div, moe: bool, capacity_factor=1.0,
              etp=1) -> dict[str, float]:
    """Bytes the op policy keeps of one layer, by part: the odd-numbered GEMMs' outputs,
    the attention kernel's output (its v width) and fp32 log-sum-exp, the block input
    (the SP shard under TP + SP) and, under SP, the two reduce-scatters' outputs."""
    kept = {"input": model.hidden * e * tokens / sp_div, "attention": 0.0, "mlp": 0.0,
            "router": 0.0, "experts": 0.0, "shared": 0.0}
    for i, (part, split, width, rows, _) in enumerate(matmuls(model, t, moe), 1):
        if i % 2 == 0:
            continue  # every second matmul is recomputed
        if part == "experts":  # routed rows: T k cf, the width over etp (tp under SP)
            per_gpu = width / tp if split == "col" else width * etp / sp_div
            kept[part] += tokens * rows * capacity_factor * per_gpu * e
        else:
            kept[part] += tokens * rows * (width / tp if split == "col" else width) * e
    heads = model.heads / tp
    kept["attention"] += tokens * heads * (model.v_head_dim * e + 4)  # out + lse
    # the outputs of the two reduce-scatters back to the sequence shard (under SP)
    kept["input"] = kept["input"] + (sp_div > 1) * 2 * model.hidden * e * tokens / sp_div
    return kept


def gradient_bytes(model, e, *, tokens, tp, moe: bool, capacity_factor=1.0) -> float:
    """The most one layer's backward adds beside its saved tensors: its MLP's input
    gradients - SwiGLU's backward holds the product's, silu's and the up projection's
    gradients at once (3 f-wide tensors), GELU's 2 - over the local rows (the routed
    rows of an MoE layer, all experts' at once as grouped GEMMs run them)."""
    n = 3 if model.gated_mlp else 2
    if moe:
        rows = tokens * model.top_k * capacity_factor
        return n * model.moe_ffn_hidden * e * rows / tp
    return n * model.ffn_hidden * e * tokens / tp
