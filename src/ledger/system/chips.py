"""GPU presets: one chip's peaks, memory and power (dense, no sparsity). Where each
figure comes from is ``ledger.system.sources``; a system of these chips (hosts, scale-up
domain, links) is ``ledger.system``."""
from __future__ import annotations

from dataclasses import dataclass

GiB = 2**30
MiB = 2**20


@dataclass(frozen=True, kw_only=True)
class GPU:
    name: str
    bf16_flops: float  # peak dense bf16 FLOP/s
    fp8_flops: float  # peak dense fp8 FLOP/s (0 where the GPU has none)
    hbm_bytes: float  # memory capacity
    hbm_bytes_per_s: float  # memory bandwidth
    gemm_efficiency: float  # fraction of peak a large bf16 GEMM sustains (measured, see GPUS)
    board_power_w: float  # the board's rated power (TDP / TGP): what a GPU-hour draws
    sms: int = 132  # streaming multiprocessors (compute units): what comm kernels take from
    generation: str = "hopper"  # NCCL's tuning tables by GPU generation (ledger.step.nccl)
    fp4_flops: float = 0.0  # peak dense fp4 FLOP/s (NVFP4 / MXFP4; 0 where the GPU has none)
    cuda_capability: tuple[int, int] | None = None  # sm_XY: which kernels and layouts run
    #   (Transformer Engine's per-tensor FP8 weights, ledger.frameworks.fp8.single_buffer)


# gemm_efficiency: the share of peak that large bf16 GEMMs reach in practice; A100 ~ 0.80
# (cuBLAS on 8k-sized GEMMs, ~250 of 312 TFLOP/s), which is what bounds end-to-end MFU.
# H100 SXM 0.62 (HOPPER_SHARE): fitted by benchmarks/fit.py (stage 2) on Megatron-LM's H100
# table, a declared calibration set (ledger.validation); H800, H200 and H20 share its GH100 die and
# take the same figure. The Blackwell generation's parts (B200, B300, GB200, GB300) share
# one figure, BLACKWELL_SHARE, fitted by benchmarks/fit.py (stage 4) on their rows of the
# declared Megatron-Bridge calibration release (ledger.validation.bridge
# CALIBRATION_RELEASE) - one figure, so their datasheet peaks keep their ratios; it is
# lower than a lone large GEMM reaches, as it also carries what the time model does not
# price on those rows (most of them fine-grained MoE, issue 32). The RTX PRO 6000, with no
# rows of its own, takes its generation's figure; CDNA's 0.60 for the MI300X, MI325X and
# MI355X; the Ada cards (L40S, L4), with no figure of their own, take Hopper's figure - a
# stated rule, not a measurement.
# Blackwell Ultra (sm_103: B300, GB300) takes BLACKWELL_SHARE times ULTRA_RATE, its
# sustained GEMM rate over Blackwell's (sm_100: B200, GB200) at equal datasheet peak, one
# figure for the die (the rule ledger.system.attention and ledger.system.gemm_rates apply),
# declared and fitted by benchmarks/fit.py (stage 4, with BLACKWELL_SHARE and the grouped
# share) on the same calibration rows - no measurement of it was found to cite: the
# datasheets give both dies the same dense BF16 / FP8 peaks (GB300 and GB200 2.5 / 5
# PFLOP/s, B300 and B200 2.25 / 4.5), i.e. GB300 is rated at 160 SMs x 8,192 FLOPs a clock
# x 1.91 GHz against GB200's 148 x 8,192 x 2.06 GHz, its maximum SM clock (stas00/
# ml-engineering compute/accelerator/README.md @ 744d01e1 L663); the one lone-GEMM
# measurement naming both dies, the same file's MAMF table (L355-356, L372-373), finds B300
# and B200 within 2.5% of each other in BF16 and FP8, and none of GB300 is published. What
# the tables measure is GB300 1.19x to 1.27x GB200 at one placement in FP8, MXFP8 and NVFP4
# alike (docs/step-time.md): ULTRA_RATE is that, read through the time model, not a kernel
# figure. 1.0 leaves sm_103 at Blackwell's share.
# cuda_capability: sm_100 for B200 / GB200, sm_103 for B300 / GB300 (NVIDIA, "CUDA GPU
# Compute Capability", developer.nvidia.com/cuda-gpus); left None elsewhere, where the
# ledger's one use of it (TE's FP8 weight layout) keeps Hopper's rule.
HOPPER_SHARE = 0.62
BLACKWELL_SHARE = 0.54
ULTRA_RATE = 1.30
ULTRA_SHARE = BLACKWELL_SHARE * ULTRA_RATE  # B300's and GB300's gemm_efficiency
# the presets built on NVIDIA's GH100 die (Hopper): a kernel measured on one of them applies
# to all (ledger.system.attention, ledger.system.gemm_rates: one rule, a part takes its die's;
# gemm_rates gives the unmeasured sm_100 die its generation's measured rate up to its peak)
GH100_PARTS = ("h100-sxm", "h800", "h100-96gb", "h100-nvl", "h200", "h20", "gh200")
GPUS = {g.name: g for g in (
    GPU(name="a100-40gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=40 * GiB,
        hbm_bytes_per_s=1.555e12, gemm_efficiency=0.80, board_power_w=400, sms=108,
        generation="ampere"),
    GPU(name="a100-80gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=80 * GiB,
        hbm_bytes_per_s=2.039e12, gemm_efficiency=0.80, board_power_w=400, sms=108,
        generation="ampere"),
    GPU(name="h100-sxm", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=HOPPER_SHARE, board_power_w=700),
    GPU(name="h800", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=HOPPER_SHARE, board_power_w=700),
    GPU(name="h100-96gb", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=95.04 * GiB,
        hbm_bytes_per_s=2.4e12, gemm_efficiency=HOPPER_SHARE, board_power_w=500),
    GPU(name="h100-nvl", bf16_flops=835e12, fp8_flops=1671e12, hbm_bytes=99_961_274_368,
        hbm_bytes_per_s=3.9e12, gemm_efficiency=HOPPER_SHARE, board_power_w=400),
    GPU(name="h200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=143771 * MiB,
        hbm_bytes_per_s=4.8e12, gemm_efficiency=HOPPER_SHARE, board_power_w=700),
    GPU(name="h20", bf16_flops=148e12, fp8_flops=296e12, hbm_bytes=96 * GiB,
        hbm_bytes_per_s=4.0e12, gemm_efficiency=HOPPER_SHARE, board_power_w=400, sms=78),
    GPU(name="gh200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=96 * GiB,
        hbm_bytes_per_s=4.0e12, gemm_efficiency=HOPPER_SHARE, board_power_w=1000),
    GPU(name="b200", bf16_flops=2250e12, fp8_flops=4500e12, fp4_flops=9000e12,
        hbm_bytes=180 * GiB, hbm_bytes_per_s=8.0e12, gemm_efficiency=BLACKWELL_SHARE,
        board_power_w=1000, sms=148, generation="blackwell",
        cuda_capability=(10, 0)),
    GPU(name="b300", bf16_flops=2250e12, fp8_flops=4500e12, fp4_flops=13125e12,
        hbm_bytes=270 * GiB, hbm_bytes_per_s=8.0e12, gemm_efficiency=ULTRA_SHARE,
        board_power_w=1100, sms=160, generation="blackwell",
        cuda_capability=(10, 3)),
    GPU(name="gb200", bf16_flops=2500e12, fp8_flops=5000e12, fp4_flops=10000e12,
        hbm_bytes=189471 * MiB, hbm_bytes_per_s=8.0e12, gemm_efficiency=BLACKWELL_SHARE,
        board_power_w=1200, sms=148, generation="blackwell",
        cuda_capability=(10, 0)),
    GPU(name="gb300", bf16_flops=2500e12, fp8_flops=5000e12, fp4_flops=15000e12,
        hbm_bytes=284208 * MiB, hbm_bytes_per_s=8.0e12, gemm_efficiency=ULTRA_SHARE,
        board_power_w=1400, sms=160, generation="blackwell",
        cuda_capability=(10, 3)),
    GPU(name="mi300x", bf16_flops=1307e12, fp8_flops=2615e12, hbm_bytes=192 * GiB,
        hbm_bytes_per_s=5.3e12, gemm_efficiency=0.60, board_power_w=750, sms=304,
        generation="cdna3"),
    GPU(name="mi325x", bf16_flops=1307.4e12, fp8_flops=2614.9e12, hbm_bytes=256 * GiB,
        hbm_bytes_per_s=6.0e12, gemm_efficiency=0.60, board_power_w=1000, sms=304,
        generation="cdna3"),
    GPU(name="mi355x", bf16_flops=2516.6e12, fp8_flops=5033.2e12, fp4_flops=10066.3e12,
        hbm_bytes=288 * GiB, hbm_bytes_per_s=8.0e12, gemm_efficiency=0.60,
        board_power_w=1400, sms=256, generation="cdna4"),
    GPU(name="l40s", bf16_flops=362.05e12, fp8_flops=733e12, hbm_bytes=48 * GiB,
        hbm_bytes_per_s=864e9, gemm_efficiency=HOPPER_SHARE, board_power_w=350, sms=142,
        generation="ada"),
    GPU(name="l4", bf16_flops=121e12, fp8_flops=242.5e12, hbm_bytes=24 * GiB,
        hbm_bytes_per_s=300e9, gemm_efficiency=HOPPER_SHARE, board_power_w=72, sms=58,
        generation="ada"),
    GPU(name="rtx-pro-6000", bf16_flops=500e12, fp8_flops=1000e12, fp4_flops=2000e12,
        hbm_bytes=96 * GiB, hbm_bytes_per_s=1.597e12, gemm_efficiency=BLACKWELL_SHARE,
        board_power_w=600, sms=188, generation="blackwell"),
)}


# The total CUDA reports (cudaMemGetInfo: torch.cuda.mem_get_info's total, PyTorch's "total
# capacity"), where logs show it: below the preset's hbm_bytes (nvidia-smi's memory.total)
# by what the driver keeps (ledger.system.sources.CUDA_TOTAL_SOURCES). The serving engines'
# budgets start from it (vLLM's requested memory, SGLang's token pool: ledger.serve);
# other GPUs: hbm_bytes.
CUDA_TOTAL_BYTES = {"h100-sxm": 79.18 * GiB}


def cuda_total_bytes(gpu: GPU) -> float:
    """The GPU's total as CUDA reports it where known, else the preset's ``hbm_bytes``."""
    return CUDA_TOTAL_BYTES.get(gpu.name, gpu.hbm_bytes)
