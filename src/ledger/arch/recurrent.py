"""The recurrent mixers of hybrid stacks (``ledger.anatomy.mixers``): what one keeps for backward
and what its core computes, per token.

Saved tensors follow the kernels the frameworks call in training; the elements below are
per token before tensor parallelism divides them (every mixer tensor is split by TP where
the mixer splits at all), the pre-norm and the in-projection's input are priced by
``ledger.arch.activations`` as for attention.

Mamba-2, Megatron-Core (``MambaMixer._ssm_training``, megatron/core/ssm/mamba_mixer.py
:679-733 at d98e8a64): ``mamba_split_conv1d_scan_combined`` without the norm keeps the
in_proj output zxBCdt and the scan output out_x (mamba_ssm ops/triton/ssd_combined.py
:888-889 at e9594ce1; the conv output and chunk states are recomputed); the RMSNorm after
it keeps its input and one fp32 rstd per group, out_proj its input (under a low-precision
recipe in the recipe's format, as Transformer Engine's Linear saves it: ``gemm_input_elements``;
the norm's input is the kernel's gated output, a tensor apart from out_x: ssd_combined.py
:855-856).
Mamba-2, transformers (``Mamba2Mixer.cuda_kernels_forward`` in training): the same kernel
with the gated norm and out_proj inside keeps zxBCdt, out_x and the rstd only.
Mamba-1 (``mamba_inner_fn``, ops/selective_scan_interface.py:196-292, checkpoint_lvl 1):
xz, x_dbl (dt, B, C), contiguous copies of B and C, the scan output, and the scan's fp32
chunk states (2N per channel per 2048-token chunk).
Gated DeltaNet (FLA ``chunk_gated_delta_rule``, fla/ops/gated_delta_rule/chunk.py:310-326
at bc3b101d): q and k repeated to the value heads, v, per-head fp32 rstd of q and k, gate
and beta, the WY matrix A (chunk C values per head per token); around it the in_proj
output (the convolution's input and the z gate), the gated norm's input and out_proj's.
Kimi Delta Attention (``chunk_kda``, fla/ops/kda/chunk.py:103-107, recompute on): q, k, v,
their rstd, the channel-wise gate and its input, beta, Aqk and Akk (C per head each);
around it the projections the convolutions read, the output gate, norm and out_proj inputs.
Lightning attention and LFM2's short convolution: the tensors of transformers' reference
modules (models/minimax/modeling_minimax.py:175-271, models/lfm2/modeling_lfm2.py:342-381),
the fused kernels' own lists not being extracted. Mamba-1's scan keeps its fp32 state
every 2048 tokens (mamba_ssm csrc/selective_scan/selective_scan.cpp:307).
"""
from __future__ import annotations

SCAN_CHUNK = 2048  # Mamba-1's selective scan keeps its state every 2048 tokens


def saved_elements(model, mixer: str, megatron: bool) -> tuple[float, float]:
    """(elements in the activation dtype, fp32 bytes) one token of a ``mixer`` layer keeps
    inside the mixer, before TP; Megatron-Core's kernels or (``megatron`` False)
    transformers'. The attention of an ``attention+mamba`` layer is priced apart."""
    if mixer in ("mamba", "attention+mamba"):
        return _mamba(model.mamba, megatron)
    if mixer == "linear":
        return _linear(model.linear)
    if mixer == "conv":
        return 6.0 * model.hidden, 0.0  # in_proj's B, C, x; B*x; the conv's output; C*conv
    return 0.0, 0.0


def gemm_input_elements(model, mixer: str, megatron: bool) -> float:
    """Of ``saved_elements``, those a linear layer saves as its GEMM input - kept in a
    low-precision recipe's format where the recipe quantizes the layer (Transformer
    Engine's Linear saves its quantized input): Megatron-Core's Mamba-2 out_proj input."""
    if mixer in ("mamba", "attention+mamba") and megatron and model.mamba.version == 2:
        return float(model.mamba.inner)
    return 0.0


def _mamba(mb, megatron: bool) -> tuple[float, float]:
    if mb.version == 1:
        n, r, di = mb.state, mb.dt_rank, mb.inner
        return 2 * di + (r + 2 * n) + 2 * n + di, 4.0 * di * 2 * n / SCAN_CHUNK
    if megatron:  # zxBCdt, out_x, the norm's input, out_proj's input; rstd per group
        return mb.in_width + 3 * mb.inner, 4.0 * mb.groups * mb.gated_norm
    return mb.in_width + mb.inner, 4.0 * mb.groups * mb.gated_norm


def _linear(la) -> tuple[float, float]:
    hv, dk, dv, c = la.value_heads, la.key_dim, la.value_dim, la.chunk
    if la.kind == "lightning":  # qkv, their activation, output, norm input, gate, product
        return 10.0 * la.value_width, 4.0 * la.value_heads
    proj = la.conv_dim + la.value_width + 2 * hv  # in_proj: q, k, v (conv input), z, b, a
    kernel = hv * (2 * dk + dv) + hv * c  # q, k at the value heads, v; A
    if la.kind == "kda":  # the channel-wise gate and its input; Aqk and Akk
        kernel += 2 * la.value_width + hv * c
    return proj + kernel + 2 * la.value_width, 4.0 * 6 * hv  # + norm and out_proj inputs


def norm_out_elements(model, mixer: str) -> float:
    """Elements per token (before TP) Megatron's ``--recompute-modules gdn_norm_out`` drops
    from a Gated DeltaNet layer: the gated output norm's output, out_proj's input (the
    value width). Megatron runs the norm and the HP-to-CP all-to-all under a
    CheckpointWithoutOutput, discards their output once out_proj has read it and rebuilds it
    in backward from the norm's inputs, the core's output and the z gate, which stay
    (megatron/core/ssm/gated_delta_net/gdn.py L266-287, common.py L347-380 @d98e8a64).
    0 for any other mixer."""
    if mixer == "linear" and model.linear.kind == "gdn":
        return float(model.linear.value_width)
    return 0.0


def has_gdn(model) -> bool:
    """Whether any layer's mixer is a Gated DeltaNet (what gdn_norm_out acts on)."""
    return any(norm_out_elements(model, k.mixer) for k in model.kind_counts)


def core_flops_per_token(model, mixer: str) -> float:
    """Forward FLOPs per token of a recurrent mixer's core - what is not a projection
    (those are weights, ``ledger.arch.flops.matmul_params_per_token``).

    - Mamba-2, the SSD algorithm in chunks of Q (Dao & Gu 2024 sec. 6, its four steps;
      mamba_ssm/modules/ssd_minimal.py:34-77): C B^T within a chunk per group (2 Q N G),
      per head the intra-chunk product with X (2 Q P), the chunk state (2 N P), its read-out
      (2 N P) and the pass between chunks (2 N P / Q).
    - Mamba-1, the selective scan: about 7 FLOPs per channel and state (exp(dt A), dt B x,
      the state update, C h) - the 7 d_inner N Megatron's own estimate counts
      (megatron/training/training.py:885-903 at d98e8a64).
    - Gated DeltaNet and KDA in chunks of C (Yang et al. 2024, arXiv:2412.06464, the WY
      form): per value head 2 C (3 d_k + 2 d_v) for the intra-chunk products, 6 d_k d_v for
      the state's read, update and write, 2/3 C^2 for the triangular solve.
    - Lightning attention in blocks of b (Qin et al. 2024, arXiv:2401.04658): per head
      4 b d within a block, 4 d^2 through the running state.
    - The causal convolution of k taps: 2 k per channel.
    """
    if mixer == "none" or mixer == "attention":
        return 0.0
    if mixer == "conv":
        return 2.0 * model.conv.kernel * model.hidden
    if "mamba" in mixer:
        mb = model.mamba
        conv = 2.0 * mb.conv_kernel * mb.conv_dim
        if mb.version == 1:
            return conv + 7.0 * mb.inner * mb.state
        q, n, p, h = mb.chunk, mb.state, mb.head_dim, mb.heads
        return conv + 2 * q * n * mb.groups + h * (2 * q * p + 4 * n * p + 2 * n * p / q)
    la = model.linear
    conv = 2.0 * la.conv_kernel * la.conv_dim
    hv, dk, dv, c = la.value_heads, la.key_dim, la.value_dim, la.chunk
    if la.kind == "lightning":
        return hv * (4 * c * dk + 4 * dk * dv)
    return conv + hv * (2 * c * (3 * dk + 2 * dv) + 6 * dk * dv + 2 * c * c / 3)


def projection_weights(model, mixer: str) -> float:
    """Weights a token multiplies in a recurrent mixer: its projections (not the
    convolution, the norms or the per-head scalars; ``ledger.anatomy.mixers``' ``projections``)."""
    if mixer in ("mamba", "attention+mamba"):
        return sum(model.mamba.projections(model.hidden))
    if mixer in ("linear", "conv"):
        return sum(getattr(model, mixer).projections(model.hidden))
    return 0.0
