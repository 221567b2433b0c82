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
sm_100 (B200, GB200) has none published of its own and takes its generation's measured die
(sm_103, ``GENERATION``) by one rule: a format's GEMMs run at the measured die's rate over
BF16 (its share times its peak's ratio to BF16's), up to the part's own peak - a share of
min(1, share x that ratio / the part's own ratio). FP8 and MXFP8 stand at 2x BF16 on both
dies (4,500 over 2,250 TFLOP/s dense on B200 and B300, 5,000 over 2,500 on GB200 and GB300:
ledger.system.chips) and keep B300's shares; NVFP4's 5.83x on B300 (13,125 TFLOP/s) makes
3.48x BF16's rate, which B200's 4x peak (9,000) reaches at 0.870 of it, and GB300's 6x
(15,000 over 2,500) at the same share 3.58x, GB200's 4x (10,000) at 0.895 - where the
unmeasured part would otherwise run NVFP4 faster than the die with 1.5x its FP4 tensor
rate and the same everything else. A kernel a part (and its generation) was not measured
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
# an unmeasured die's parts -> (their generation's measured die, the preset of it whose
# peaks stand beside theirs: the datasheets pair B200 / B300 and GB200 / GB300)
GENERATION = {"b200": ("b300", "b300"), "gb200": ("b300", "gb300")}
_PEAK_FIELD = {"fp8": "fp8_flops", "mxfp8": "fp8_flops", "nvfp4": "fp4_flops"}
SOURCE = ("NVIDIA/TransformerEngine d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst "
          "L139-157 (benchmark_gemm.py --pre-quantize, B300 SXM6 AC, hidden 4096, FFN 16384, "
          "M 15,872: BF16 13.102, FP8 current 6.812, MXFP8 7.161, NVFP4 3.764 ms per layer); "
          "L287-296 (the same on an H200 NVL: BF16 31.968, FP8 current 16.785 ms per layer; "
          "H200 NVL dense peaks 835 / 1,671 TFLOP/s: NVIDIA H200 datasheet, "
          "H200 NVL column, 1,671 / 3,341 with sparsity); sm_100 beside sm_103: "
          "stas00/ml-engineering compute/accelerator/README.md @ 744d01e1 L355-356, "
          "L372-373 (MAMF, B200 and B300 within 2.5% in BF16 and FP8)")
_BLOCK_FP8 = ("blockwise", "deepseek-v3")  # TE emulates FP8 block scaling with MXFP8


def measured_kernel(rec) -> str:
    """Which of the guide's measured kernels a recipe's GEMMs run: nvfp4, mxfp8 or fp8."""
    if rec.gemm_format == "fp4":
        return "nvfp4"
    return "mxfp8" if rec.block_scaled or rec.name in _BLOCK_FP8 else "fp8"


def kernel_share(gpu_name: str, kernel: str) -> float:
    """The share of its own peak the guide's ``kernel`` (bf16, fp8, mxfp8 or nvfp4)
    sustains, over the share a BF16 GEMM sustains, on ``gpu_name`` (its die's measurement,
    else its generation's measured rate over BF16 up to its own peak: the module
    docstring); 1 for a part (or a kernel of it) without a measurement."""
    part = MEASURED_BY.get(gpu_name)
    if part is None and gpu_name in GENERATION and kernel in _PEAK_FIELD:
        die, twin = GENERATION[gpu_name]  # the measured die's rate over BF16, up to own peak
        own, other = (getattr(g, _PEAK_FIELD[kernel]) / g.bf16_flops
                      for g in (GPUS[gpu_name], GPUS[twin]))
        return min(1.0, kernel_share(twin, kernel) * other / own)
    ms, peak = _MEASURED_MS.get(part, {}), _MEASURED_PEAK.get(part, {})
    if kernel not in ms:
        return 1.0
    return ms["bf16"] / ms[kernel] / (peak[kernel] / peak["bf16"])


def relative_share(gpu_name: str, rec) -> float:
    """The share of its own peak a GEMM of recipe ``rec`` sustains, over the share a BF16
    GEMM sustains, on ``gpu_name``; 1 for a part without a measurement or no recipe."""
    return 1.0 if rec is None else kernel_share(gpu_name, measured_kernel(rec))
