"""The fused attention core's sustained rate, as NVIDIA measures cuDNN's kernel (the one
Transformer Engine runs on Hopper and Blackwell): a share of the GPU's dense BF16 peak for
the forward and for the backward, by key length. ``ledger.step.layer_time`` prices a
flash attention core at it; a GPU with no measurement keeps the GEMM pricing.

Why not as two GEMMs: a flash kernel keeps the scores on chip, so its head dimension is
no thin, bandwidth-bound GEMM dimension; what bounds it is the softmax between the two
products (the exponentials run on the SFUs, MUFU.EX2: NVIDIA, "Making Softmax More
Efficient with NVIDIA Blackwell Ultra", developer.nvidia.com/blog, 2026 - Blackwell Ultra
doubles that throughput, and at the same datasheet BF16 peak GB300 runs the kernel 1.18x
GB200's rate forward and 1.06x backward at 8K keys, below), and the backward's five
products against the forward's two (2.5x its FLOPs, as the measurements count them).

The measurements: NVIDIA/cudnn-frontend, benchmark/sdpa_benchmark_training/results/
{h200,gb200,gb300}_919_only_cudnn/llama3.1_*.csv (h200 and gb200 at df73764a, gb300 at
afa9f7c0): cuDNN 9.19.1, BF16, Llama 3.1's attention (64 query heads, 8 KV heads, head
dim 128), causal (top_left), batch 1, one sequence of s tokens, non-deterministic
backward; TFLOP/s as the CSV gives them - the forward counts 4 s^2 h d / 2 FLOPs, the
backward 2.5x that (each row's time x rate gives both). Which parts take which
measurement, one rule: a part takes the measurement of its die (GH100: H200's, the rule
ledger.system.chips states for the GEMM share; sm_100 B200 / GB200: GB200's; sm_103
B300 / GB300: GB300's), as a share of the measured part's datasheet BF16 peak (989 / 2,500
/ 2,500 TFLOP/s), applied to the part's own peak.

A sliding-window layer (``window_shares``) takes the window kernel's own measurement where
one exists for its die. Which kernel runs gpt-oss's layers (learnable-softmax sinks, a
128-key window every other layer): Transformer Engine turns FlashAttention off for any
softmax type but vanilla (pytorch/attention/dot_product_attention/utils.py L715-717 @ v2.12,
5671fd36) and runs cuDNN's F16_arbitrary_seqlen kernel for sinks from cuDNN 9.13.1 on sm_90
and sm_100 alike (common/fused_attn/fused_attn.cpp L443-447), the window handed to it as a
band (L403-437); on Blackwell its training backward is the non-deterministic one unless
determinism is asked for (L448-455), which Megatron-Bridge's perf launcher does for DeepSeek
only (scripts/performance/perf_plugins.py L293-294 @ v0.4.0). So the window is the kernel's
and its time is a band's, not the causal prefix's.
"""
from __future__ import annotations

import numpy as np

from ledger.system.chips import GH100_PARTS

# key length s -> (forward, backward) TFLOP/s, the CSVs' top_left bfloat16 rows; and their
# top_left fp8 rows (cuDNN's FP8 attention, E4M3 with per-tensor scales: what Megatron's
# --fp8-dot-product-attention hands TE, ledger.frameworks.fp8_attention), both counted
# against the BF16 peak as the CSVs count them
_MEASURED_FP8 = {
    "h200": (989e12, {2048: (698, 393), 4096: (854, 471), 8192: (964, 430),
                      16384: (1010, 374), 32768: (1042, 370)}),
    "gb200": (2500e12, {2048: (1286, 897), 4096: (1707, 1229), 8192: (1987, 1478),
                        16384: (2135, 1626), 32768: (2210, 1705)}),
    "gb300": (2500e12, {2048: (1636, 945), 4096: (2324, 1309), 8192: (2780, 1590),
                        16384: (3019, 1759), 32768: (3129, 1852)}),
}
_MEASURED = {
    "h200": (989e12, {2048: (484, 370), 4096: (591, 474), 8192: (644, 541),
                      16384: (673, 579), 32768: (688, 581)}),
    "gb200": (2500e12, {2048: (1042, 836), 4096: (1335, 1132), 8192: (1598, 1311),
                        16384: (1687, 1402), 32768: (1720, 1473)}),
    "gb300": (2500e12, {2048: (1266, 906), 4096: (1672, 1195), 8192: (1887, 1385),
                        16384: (1968, 1490), 32768: (2014, 1549)}),
}
MEASURED_BY = {g: "h200" for g in GH100_PARTS} | {
    "b200": "gb200", "gb200": "gb200", "b300": "gb300", "gb300": "gb300"}
# The sliding-window kernel (a local layer's core), measured on the model that runs it:
# NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/gpt_oss/{gb200,gb300}/
# gpt_oss_20260424_{100011,100022}.csv at fb682ce7 (configs/gpt_oss.py L15-18, L36 there:
# GPT-OSS's attention, window 128, head dim 64; the CSVs: causal top_left, batch 2, 128
# heads, cuDNN backend 9.22.0), the bfloat16 rows with the non-deterministic backward (CSV
# lines 2-3, 11-12, 20-21, 29-30, 38-39): TFLOP/s over the window's FLOPs
# (benchmark_single_sdpa.py L1147-1191 flops(): W (W + 1) / 2 + (S - W) W scores a head,
# 2 (d + d) FLOPs each forward, 2.5x that backward - the ledger's w - w^2 / (2 s) keys a
# query, ledger.arch.flops). The band of 128 keys runs at 6-7% of the peak as measured,
# against 53% for the causal kernel at 4K keys: the window's FLOPs priced at the causal
# kernel's rate take an eighth of its time.
# window -> {key length: (forward, backward) TFLOP/s}; key 32768's forward is as measured
_MEASURED_WINDOW = {
    "gb200": (2500e12, 128, {2048: (153, 176), 4096: (161, 182), 8192: (165, 187),
                             16384: (167, 188), 32768: (104, 186)}),
    "gb300": (2500e12, 128, {2048: (160, 184), 4096: (167, 191), 8192: (172, 198),
                             16384: (173, 200), 32768: (108, 199)}),
}
# ... and the same CSVs' fp8 rows (lines 5-6, 14-15, 23-24, 32-33, 41-42: E4M3, the kind
# ``_MEASURED_FP8`` takes, what Transformer Engine runs for sinks + window under FP8 attention
# on sm_100+ from cuDNN 9.21, dot_product_attention/utils.py L934-944, L1148-1159 @ 4220403e,
# the TE Megatron-Bridge v0.5.0 pins; under an MXFP8 linear recipe attention runs
# per-tensor FP8, dot_product_attention.py L115-116 there): the forward keeps to the band,
# the backward does not - its time grows as s^2 (1.73 / 6.18 / 23.2 / 90.3 ms at 4K / 8K /
# 16K / 32K keys on GB200), the causal prefix's work, so its rate over the window's FLOPs
# falls with the key length
_MEASURED_WINDOW_FP8 = {
    "gb200": (2500e12, 128, {2048: (165, 78), 4096: (173, 49), 8192: (177, 28),
                             16384: (179, 15), 32768: (179, 8)}),
    "gb300": (2500e12, 128, {2048: (193, 89), 4096: (203, 57), 8192: (208, 33),
                             16384: (211, 18), 32768: (212, 9)}),
}


# The causal kernel at head dim 64 (a narrower core: its QK^T and PV have half the FLOPs a
# score, the softmax between them - the exponentials, MUFU - the same): NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training/results/{h200,gb200,gb300}_919_only_cudnn/gpt_oss_
# 2026022{7_034819,6_175022,6_185932}.csv at df73764a (configs/gpt_oss.py L14-18, L33-36
# there: 64 query / 8 KV heads, head dim 64, batch 2, causal top_left with a 1,024-key
# window, cuDNN 9.19, non-deterministic backward): forward and backward ms by key length,
# the bfloat16 rows (CSV lines 2, 4, 6, 8, 10 on gb200 / gb300; 2, 9, 16, 23, 30 on h200)
# and the fp8 rows (lines 3, 5, 7, 9, 11 on gb200 / gb300; H200 fails them: "hidden_dim
# shoud be equal to 128"). Their TFLOP/s are the benchmark's own count (benchmark_single_
# sdpa.py L952-995 there: W (W + 1) / 2 + (S - W) W scores a head, 2 (d + d) FLOPs each
# forward, 2.5x backward), which at 4K keys and beyond is the causal kernel's tiles run as
# a band of eight; the FP8 backward does not keep to the band - its time grows as s^2
# (0.25 / 0.79 / 2.75 / 10.3 / 39.7 ms on GB300), the causal prefix's work, as the window
# kernel's (``_MEASURED_WINDOW_FP8``) - so its rate is counted over the causal scores,
# s (s + 1) / 2 a head. In BF16 the head-dim-64 kernel runs at 0.37-0.48 of the
# head-dim-128 kernel's rate forward and 0.44-0.67 backward on Blackwell, 0.51-0.71 on H200.
# An assumption, not what the source covers: every CSV row is the 1,024-key window kernel,
# its rate counted over the band; a full-causal layer at head dim <= 64 (gpt-oss's global
# layers, any model with head dim 32-64) takes that per-score rate, though its kernel runs
# s / 128 tiles a query row (one masked) where the band runs about eight.
# FP8 attention on Hopper: Transformer Engine's FP8 fused attention trains on sm_90 only at
# d_qk = d_v = 128 (common/fused_attn/fused_attn.cpp L258-270 @ 4220403e: "sm90: fwd
# d<=256, bwd d=128 only"; the H200 CSVs' fp8 rows fail "hidden_dim shoud be equal to 128"),
# and with fp8_dpa it disables every other backend (pytorch/attention/dot_product_attention/
# utils.py L538-564 there), so such a launch finds no kernel: its core is priced as the
# BF16 kernel a run without FP8 attention takes (``shares``).
FP8_HOPPER_HEAD_DIM = 128
D64_WINDOW, D64_BATCH, D64_HEADS, D64_DIM = 1024, 2, 64, 64
_MEASURED_D64_MS = {
    "h200": (989e12, {2048: (0.166, 0.488), 4096: (0.358, 1.042), 8192: (0.738, 2.149),
                      16384: (1.499, 4.392), 32768: (3.021, 9.045)}),
    "gb200": (2500e12, {2048: (0.104, 0.230), 4096: (0.209, 0.487), 8192: (0.423, 0.998),
                        16384: (0.853, 2.024), 32768: (1.711, 4.099)}),
    "gb300": (2500e12, {2048: (0.089, 0.221), 4096: (0.178, 0.472), 8192: (0.359, 0.965),
                        16384: (0.722, 1.951), 32768: (1.448, 3.930)}),
}
_MEASURED_D64_FP8_MS = {
    "gb200": (2500e12, {2048: (0.101, 0.271), 4096: (0.203, 0.862), 8192: (0.411, 3.011),
                        16384: (0.831, 11.332), 32768: (1.667, 43.921)}),
    "gb300": (2500e12, {2048: (0.074, 0.253), 4096: (0.148, 0.792), 8192: (0.299, 2.752),
                        16384: (0.600, 10.265), 32768: (1.204, 39.694)}),
}


def _d64_tflops(s: int, fwd_ms: float, bwd_ms: float, causal_bwd: bool = False):
    """(forward, backward) TFLOP/s of one head-dim-64 measurement, counted as the
    benchmark counts them (``_MEASURED_D64_MS``); the backward over the causal scores
    where ``causal_bwd`` (the FP8 kernel's)."""
    w = D64_WINDOW
    band = w * (w + 1) // 2 + (s - w) * w if s > w else s * (s + 1) // 2
    scores = D64_BATCH * D64_HEADS * 2 * (D64_DIM + D64_DIM)  # FLOPs of one score a head
    bwd_scores = s * (s + 1) // 2 if causal_bwd else band
    return band * scores / fwd_ms / 1e9, 2.5 * bwd_scores * scores / bwd_ms / 1e9


_MEASURED_D64 = {g: (peak, {s: _d64_tflops(s, *ms) for s, ms in table.items()})
                 for g, (peak, table) in _MEASURED_D64_MS.items()}
_MEASURED_D64_FP8 = {g: (peak, {s: _d64_tflops(s, *ms, causal_bwd=True)
                                for s, ms in table.items()})
                     for g, (peak, table) in _MEASURED_D64_FP8_MS.items()}


def shares(gpu_name: str, keys, fp8: bool = False, head_dim: int | None = None):
    """(forward, backward) share of the GPU's BF16 peak the fused attention core sustains
    at ``keys`` keys (a number or an array), its FP8 kernel's under ``fp8``: log-linear
    between the measured lengths, the end points' beyond them; None for a GPU without a
    measurement. A core whose head dim is at most 64 takes the head-dim-64 measurement
    of its kind where its die has one (``_MEASURED_D64``, ``_MEASURED_D64_FP8``; full-causal
    layers too: the window kernel's per-score rate, an assumption), every other the
    head-dim-128 one. FP8 on a Hopper die at a head dim other than 128, which TE does not
    train in FP8 (``FP8_HOPPER_HEAD_DIM``), takes the BF16 kernel's."""
    part = MEASURED_BY.get(gpu_name)
    if part is None:
        return None
    if fp8 and part == "h200" and head_dim not in (None, FP8_HOPPER_HEAD_DIM):
        fp8 = False
    narrow = _MEASURED_D64_FP8 if fp8 else _MEASURED_D64
    if head_dim is not None and head_dim <= D64_DIM and part in narrow:
        return _interpolated(*narrow[part], keys)
    peak, table = (_MEASURED_FP8 if fp8 else _MEASURED)[part]
    return _interpolated(peak, table, keys)


def _interpolated(peak: float, table: dict, keys):
    """(forward, backward) shares of ``peak`` at ``keys``: log-linear in the key length
    between a table's measured (TFLOP/s forward, backward) points, its end points beyond."""
    s = np.log2(sorted(table))
    fwd, bwd = (np.array([table[k][i] for k in sorted(table)]) * 1e12 / peak for i in (0, 1))
    x = np.log2(np.maximum(np.asarray(keys, dtype=float), 1.0))
    return np.interp(x, s, fwd), np.interp(x, s, bwd)


def window_shares(gpu_name: str, keys, window: int | None, fp8: bool = False):
    """(forward, backward) share of the GPU's BF16 peak cuDNN's sliding-window kernel
    sustains over a local layer's window FLOPs at ``keys`` keys, its FP8 kernel's under
    ``fp8`` (log-linear between the measured lengths, as ``shares``); None without a
    measurement for the GPU's die, without a window, or for a window wider than the measured
    one (a wider band is no longer the two-tile kernel measured here: it keeps the causal
    kernel's rate)."""
    part = MEASURED_BY.get(gpu_name)
    measurements = _MEASURED_WINDOW_FP8 if fp8 else _MEASURED_WINDOW
    if part not in measurements or not window:
        return None
    peak, measured, table = measurements[part]
    if window > measured:
        return None
    return _interpolated(peak, table, keys)
