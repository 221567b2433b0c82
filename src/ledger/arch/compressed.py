"""What a DeepSeek-V4 layer saves for backward beyond a plain one
(``ledger.anatomy.compressed`` says what the parts are): its attention block and the mHC
residual streams. Elements per token times bytes per element, as ``ledger.arch.activations``
prices every layer (``e`` the activation dtype, fp32 statistics 4 bytes, ``gi`` a GEMM
input's bytes under the table's recipe).

Megatron-Core d98e8a64 has the mHC module but not DeepSeek-V4's attention, so the
attention is read off transformers 5.23.0's modules (``modeling_deepseek_v4.py``, ``v4:L``)
with the fused flash kernel's own tensors (q, k, out, lse) as the table says; the mHC
sites off Megatron-Core's HyperConnectionModule (hyper_connection.py @ d98e8a64, ``hc:L``).
What ``--recompute-modules mla_up_proj`` drops is read off the attention Megatron-LM's dev
branch builds for DeepSeek-V4 (the commit Megatron-Bridge 0.6.0 pins for it, ``.dev.commit``
43e45e13: megatron/core/transformer/experimental_attention_variant/
deepseek_v4_hybrid_attention.py, ``dsv4:L``).
"""
from __future__ import annotations

from ledger.anatomy.compressed import INDEXED_RATIO


def attention_elements(model, t, e, gi, flash: bool, ratio: int, norm,
                       drop_up: bool = False) -> tuple[float, float]:
    """(per token and TP rank, per token replicated across TP) bytes of one attention block
    with compress ``ratio``, the block's pre-norm aside (``norm(width, stats)``: what the
    table's norm keeps per token):

    - the query latent: q_a's output through q_a_norm (its input and statistic) and q_b's
      input (v4:L827); q_b's output through the unweighted per-head RMSNorm (its input and
      one statistic per head, v4:L828-829);
    - the shared K=V head: kv_proj's output through kv_norm (v4:L832), kept once by the
      kernel (K and V are one tensor, v4:L863-864);
    - the kernel: q (heads x d), the output the grouped o_a reads, the log-sum-exp; o_b's
      input (g x o_lora, v4:L881-883);
    - a compressor: its kv and gate projections (width w: 2 d for CSA's two series, d for
      HCA) and the softmax over each window that pools them (v4:L427-429, L684-686);
    - CSA's indexer: its own compressor at 2 d_I, its queries (heads_I x d_I) and head
      weights (heads_I), and its compressed keys (d_I per ratio tokens) (v4:L530-578).

    ``drop_up`` (Megatron's ``mla_up_proj``): q_b, the per-head norm, kv_proj, kv_norm and
    RoPE run under one CheckpointWithoutOutput (dsv4:L691-878) whose outputs - the kernel's
    q and its K=V head - are discarded once the kernel has run (dsv4:L340-343) and rebuilt
    in the backward: what is kept is the checkpoint's input, q_a_norm's output in the
    activation dtype (the norm itself, dsv4:L685-689, runs outside it; kv_proj's input is
    the block's normed input, kept for q_a anyway).
    """
    a, d, r_q, c = model.heads, model.head_dim, model.q_lora_rank, model.compressed
    split = 0.0 if drop_up else norm(a * d, a)  # q_b's output into the per-head norm
    repl = norm(r_q, 1) + (r_q * e if drop_up else r_q * gi + norm(d, 1))  # q_a_norm, q_b's
    if flash:  # input; kv_norm
        split += a * d * e * (not drop_up) + a * d * (t.attn_out_bytes or e + t.fp8_input_bytes) \
            + a * 4
        repl += d * e * (not drop_up)  # the one K=V head
    split += c.o_groups * c.o_lora_rank * gi  # o_b's input
    if ratio:
        w = 2 * d if ratio == INDEXED_RATIO else d
        repl += 2 * w * e + d * e / ratio  # kv, the window softmax; the pooled entries
    if ratio == INDEXED_RATIO:
        ih, ihd = model.index_heads, model.index_head_dim
        repl += 2 * 2 * ihd * e + ih * ihd * e + ih * e + ihd * e / ratio
    return split, repl


def hc_elements(model, e) -> float:
    """Bytes per token of one layer's two mHC sites: each keeps the n-stream input its
    projection, norm, aggregation and residual mix all read (n h: one tensor, hc:L217-228,
    L371-418), the block output the expansion multiplies (h, hc:L288-318), and its small
    fp32 weights - h_pre, h_post, h_res and Sinkhorn's initial matrix (2 n + 2 n^2,
    hc:L89-113, L231-260)."""
    n, h = getattr(model, "hc_mult", 0), model.hidden
    if not n:
        return 0.0
    return 2 * ((n * h + h) * e + (2 * n + 2 * n * n) * 4)
