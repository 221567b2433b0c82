"""Low-precision GEMMs' sustained rate against BF16's, as Transformer Engine measures its
own kernels: the share of its datasheet peak an FP8 or NVFP4 GEMM sustains, relative to
the share a BF16 GEMM of the same shapes sustains on the same part. ``ledger.step.gemm``
multiplies a low-precision GEMM's peak by it (the part's sustained BF16 share,
``GPU.gemm_efficiency``, stays the one the calibration fits); a part with no measurement
keeps 1 - every precision at the same share of its own peak.

Why not the datasheet ratio: NVFP4's peak is 6x BF16's on Blackwell Ultra (sm_103) and
4x on Blackwell (sm_100), but its kernels do not reach the same share of it. TE's GEMM
profiling guide (NVIDIA/TransformerEngine d0067d0d, docs/examples/gemm_profiling/
gemm_profiling.rst L139-157, from #2863 1609c890) runs benchmarks/gemm/benchmark_gemm.py
with ``--pre-quantize`` (inputs already in the target format: the GEMM kernels alone, the
quantization the ledger prices apart) on an NVIDIA B300 SXM6 AC, a 5B model's 12 GEMMs
per layer (hidden 4096, FFN 16384, 15,872 tokens: fprop, dgrad and wgrad): per layer
BF16 13.102 ms, FP8 current scaling 6.812 ms, MXFP8 7.161 ms, NVFP4 3.764 ms - NVFP4 1.90x
MXFP8's against a datasheet 2.9x. Against B300's datasheet peaks (ledger.system.chips:
2,250 / 4,500 / 13,125 TFLOP/s dense) that is 0.962 (FP8 per-tensor), 0.915 (MXFP8) and
0.597 (NVFP4) of BF16's share.

The same guide measures Hopper the same way (L233-300: the same 5B model on an NVIDIA
H200 NVL, ``--pre-quantize``, L287-296): per layer BF16 31.968 ms, FP8 current scaling
16.785 ms - 1.90x against a datasheet 2x (H200 NVL dense 835 / 1,671 TFLOP/s, half the
NVIDIA H200 datasheet's 1,671 / 3,341 with sparsity), 0.952 of BF16's share. FP8 block
scaling is not timed kernel-only there (Hopper's cuBLAS takes no 2D-by-2D block-scaled
inputs, L283-285) and keeps 1.

Which recipes take which figure, one rule: NVFP4 its own; the block-scaled FP8 recipes
MXFP8's (TE's FP8 block scaling runs as MXFP8 on Blackwell, the same guide L172-177); the
per-tensor (and torchao's per-row) FP8 ones current scaling's (DelayedScaling runs the
same kernel; the guide times it with its quantization, L120-125). Which parts take the
measurement: the measured part's die, as ``ledger.system.attention`` rules - sm_103
(B300, GB300) the B300 figures, GH100 (H100, H800, H200, H20, GH200) the H200 NVL's.
sm_100 (B200, GB200) has none published like for like and takes its generation's measured
die (sm_103, ``GENERATION``) by one rule: a format's GEMM takes, in units of the same
GEMM's BF16 time, its tensor-core time at BF16's share of the format's own peak plus a
remainder that does not run faster with the tensor cores (its scale factors' loads, the
epilogue's BF16 output: the same HBM on both dies), the remainder read off the measured
die - t / t_bf16 = 1 / R_own + (ms / ms_bf16 - 1 / R_measured), R a peak's ratio to BF16's,
a share of 1 / (1 + R_own x that remainder). FP8 and MXFP8 stand at 2x BF16 on both dies
(4,500 over 2,250 TFLOP/s dense on B200 and B300, 5,000 over 2,500 on GB200 and GB300:
ledger.system.chips) and keep B300's shares exactly; NVFP4's remainder on B300 is 3.764 /
13.102 - 2,250 / 13,125 = 0.116 of the BF16 time, so a 4x peak (B200's 9,000, GB200's
10,000) runs 2.73x BF16's rate, 0.683 of its peak ratio, where GB300's 6x runs B300's
measured 0.597 (3.58x). Kernel-only sm_100 measurements exist only from other harnesses
and shapes, and bracket it: vLLM's CUTLASS NVFP4 GEMM against torch BF16 on B200 at N
6,144, K 4,096, M 4,096-16,384 0.67-0.72 of the ratio (vllm-project/vllm PR #20646, its
"Before" table); torchao's cuBLASLt ``_scaled_mm`` NVFP4 against ``nn.Linear`` on B200
0.79 at 4,096 cubed, 0.94 at 6,144 and 8,192 cubed over a low BF16 baseline (pytorch/ao
PR #2427, 09840d195, benchmarks/float8/bench_matmul.py); torchao's CUTLASS MXFP4 on B200
0.55-0.77 (pytorch/ao efd0d1c3b). The rule before this one (the measured die's rate over
BF16, up to the part's own peak: 0.870 on B200, 0.895 on GB200) stood above all of them
but the large square cuBLASLt shapes. A kernel a part (and its generation) was not measured
in keeps 1. The one lone-GEMM measurement naming both dies finds them alike in BF16 and FP8
(stas00/ml-engineering compute/accelerator/README.md @ 744d01e1 L355-356, L372-373, MAMF:
B200 77.6% / 76.3%, B300 78.6% / 74.5% of the BF16 / FP8 peak). What the rule moves: the
Megatron-Bridge tutorial's Llama 3.1 8B on 4 GB200 (benchmarks/validation.py) publishes
MXFP8 at 1.350x BF16's step, predicted 1.537x at sm_100's datasheet ratio and 1.464x now.
"""
from __future__ import annotations

from ledger.system.chips import GH100_PARTS, GPUS

# the guide's pre-quantized per-layer totals (ms) and the measured part's dense peaks
_MEASURED_MS = {"b300": {"bf16": 13.102, "fp8": 6.812, "mxfp8": 7.161, "nvfp4": 3.764},
                "h200-nvl": {"bf16": 31.968, "fp8": 16.785}}
_MEASURED_PEAK = {"b300": {"bf16": 2250e12, "fp8": 4500e12, "mxfp8": 4500e12,
                           "nvfp4": 13125e12},
                  "h200-nvl": {"bf16": 835e12, "fp8": 1671e12}}
MEASURED_BY = {"b300": "b300", "gb300": "b300"} | {g: "h200-nvl" for g in GH100_PARTS}
# an unmeasured die's parts -> their generation's measured die (its remainder, their peaks)
GENERATION = {"b200": "b300", "gb200": "b300"}
_PEAK_FIELD = {"fp8": "fp8_flops", "mxfp8": "fp8_flops", "nvfp4": "fp4_flops"}
SOURCE = ("NVIDIA/TransformerEngine d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst "
          "L139-157 (benchmark_gemm.py --pre-quantize, B300 SXM6 AC, hidden 4096, FFN 16384, "
          "M 15,872: BF16 13.102, FP8 current 6.812, MXFP8 7.161, NVFP4 3.764 ms per layer); "
          "L287-296 (the same on an H200 NVL: BF16 31.968, FP8 current 16.785 ms per layer; "
          "H200 NVL dense peaks 835 / 1,671 TFLOP/s: NVIDIA H200 datasheet, "
          "H200 NVL column, 1,671 / 3,341 with sparsity); sm_100 beside sm_103: "
          "stas00/ml-engineering compute/accelerator/README.md @ 744d01e1 L355-356, "
          "L372-373 (MAMF, B200 and B300 within 2.5% in BF16 and FP8); sm_100 NVFP4, other "
          "harnesses: vllm-project/vllm PR #20646 (CUTLASS, B200, 0.67-0.72 of the peak "
          "ratio), pytorch/ao PR #2427 09840d195 (cuBLASLt, B200, 0.79 at 4096^3)")
_BLOCK_FP8 = ("blockwise", "deepseek-v3")  # TE emulates FP8 block scaling with MXFP8


def measured_kernel(rec) -> str:
    """Which of the guide's measured kernels a recipe's GEMMs run: nvfp4, mxfp8 or fp8."""
    if rec.gemm_format == "fp4":
        return "nvfp4"
    return "mxfp8" if rec.block_scaled or rec.name in _BLOCK_FP8 else "fp8"


def kernel_share(gpu_name: str, kernel: str) -> float:
    """The share of its own peak the guide's ``kernel`` (bf16, fp8, mxfp8 or nvfp4)
    sustains, over the share a BF16 GEMM sustains, on ``gpu_name`` (its die's measurement,
    else its generation's measured remainder beside its own peak's tensor time: the
    module docstring); 1 for a part (or a kernel of it) without a measurement."""
    part = MEASURED_BY.get(gpu_name)
    if part is None and gpu_name in GENERATION and kernel in _PEAK_FIELD:
        die = GENERATION[gpu_name]  # the measured die's remainder, this part's own peak
        ms, peak = _MEASURED_MS[die], _MEASURED_PEAK[die]
        if kernel not in ms:
            return 1.0
        rest = ms[kernel] / ms["bf16"] - peak["bf16"] / peak[kernel]  # of BF16's time
        own = getattr(GPUS[gpu_name], _PEAK_FIELD[kernel]) / GPUS[gpu_name].bf16_flops
        return min(1.0, 1.0 / (1.0 + own * max(0.0, rest)))
    ms, peak = _MEASURED_MS.get(part, {}), _MEASURED_PEAK.get(part, {})
    if kernel not in ms:
        return 1.0
    return ms["bf16"] / ms[kernel] / (peak[kernel] / peak["bf16"])


def relative_share(gpu_name: str, rec) -> float:
    """The share of its own peak a GEMM of recipe ``rec`` sustains, over the share a BF16
    GEMM sustains, on ``gpu_name``; 1 for a part without a measurement or no recipe."""
    return 1.0 if rec is None else kernel_share(gpu_name, measured_kernel(rec))
