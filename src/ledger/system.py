"""Hardware: GPU presets and clusters (nodes of GPUs, an intra- and an inter-node link).

Units live in the names: ``_flops`` is FLOP/s, ``_bytes`` bytes, ``_bytes_per_s`` bytes
per second, ``_s`` seconds. Figures are the vendors' datasheet numbers (dense, no
sparsity); link bandwidths are per GPU, one direction.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ledger.errors import LedgerError

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


# gemm_efficiency: the share of peak that large bf16 GEMMs reach in practice; A100 ~ 0.80
# (cuBLAS on 8k-sized GEMMs, ~250 of 312 TFLOP/s), which is what bounds end-to-end MFU.
# H100 SXM 0.62: fitted by benchmarks/fit.py (stage 2) on Megatron-LM's H100 table, a
# declared calibration set (ledger.validation); H800 and H200 share its GH100 die and
# clocks and take the same figure. The others take their generation's figure.
GPUS = {g.name: g for g in (
    GPU(name="a100-40gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=40 * GiB,
        hbm_bytes_per_s=1.555e12, gemm_efficiency=0.80, board_power_w=400, sms=108,
        generation="ampere"),
    GPU(name="a100-80gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=80 * GiB,
        hbm_bytes_per_s=2.039e12, gemm_efficiency=0.80, board_power_w=400, sms=108,
        generation="ampere"),
    GPU(name="h100-sxm", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=0.62, board_power_w=700),
    GPU(name="h800", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=0.62, board_power_w=700),
    GPU(name="h100-96gb", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=95.04 * GiB,
        hbm_bytes_per_s=2.4e12, gemm_efficiency=0.62, board_power_w=500),
    GPU(name="h100-nvl", bf16_flops=835e12, fp8_flops=1671e12, hbm_bytes=99_961_274_368,
        hbm_bytes_per_s=3.9e12, gemm_efficiency=0.62, board_power_w=400),
    GPU(name="h200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=143771 * MiB,
        hbm_bytes_per_s=4.8e12, gemm_efficiency=0.62, board_power_w=700),
    GPU(name="gh200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=96 * GiB,
        hbm_bytes_per_s=4.0e12, gemm_efficiency=0.62, board_power_w=1000),
    GPU(name="b200", bf16_flops=2250e12, fp8_flops=4500e12, hbm_bytes=180 * GiB,
        hbm_bytes_per_s=8.0e12, gemm_efficiency=0.70, board_power_w=1000, sms=148,
        generation="blackwell"),
    GPU(name="mi300x", bf16_flops=1307e12, fp8_flops=2615e12, hbm_bytes=192 * GiB,
        hbm_bytes_per_s=5.3e12, gemm_efficiency=0.60, board_power_w=750, sms=304,
        generation="cdna3"),
)}


# Where each preset's peaks come from (dense, no sparsity: the datasheets' sparse FP8
# figures are twice these). The A100 has no FP8 tensor cores, so its fp8 peak is 0. SMs:
# A100 108, H100 SXM / H800 / H200 132, B200 148 (NVIDIA architecture whitepapers),
# MI300X 304 compute units (AMD CDNA 3 whitepaper); the generation picks NCCL's tables
# (RCCL's, for the MI300X, are not modelled: it takes Hopper's).
GPU_SOURCES = {
    "a100-40gb": "NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOP/s dense, no FP8; "
                 "40 GB HBM2 1,555 GB/s",
    "a100-80gb": "NVIDIA A100 datasheet: BF16 312 TFLOP/s, no FP8; 80 GB HBM2e 2,039 GB/s",
    "h100-sxm": "NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 1,979 / FP8 3,958 "
                "TFLOP/s with sparsity, i.e. 989 / 1,979 dense; 80 GB HBM3 3.35 TB/s; "
                "NVLink 900 GB/s (both directions)",
    "h800": "NVIDIA H800 (SXM): the H100 SXM's compute and HBM (BF16 989, FP8 1,979 "
            "TFLOP/s dense; 80 GB, 3.35 TB/s) with export-limited NVLink, 400 GB/s on the "
            "datasheet in the convention of the H100's 900 GB/s (both directions): 200 GB/s "
            "per direction. DeepSeek-V3 report (arXiv:2412.19437) sec. 3.1: 8 H800 per node "
            "over NVLink/NVSwitch, InfiniBand between nodes; sec. 3.2.2: NVLink 160 GB/s, "
            "IB 50 GB/s per GPU (achieved: 0.8 x 200 GB/s, 400 Gb/s NICs)",
    "h100-96gb": "Meta Grand Teton H100 SXM: '96GB HBM2e with 2.4 TB/sec peak memory "
                 "bandwidth', 500 W (torchtitan docs/performance.md @d4c86e37, where its "
                 "measured peaks come from); torch reports 'NVIDIA H100 (0) with 95.04GiB' "
                 "(torchtitan commit ff3e9f59's log, 2024-04-10): that is its capacity here. "
                 "Compute as the H100 SXM datasheet's (the same GH100 SXM part; the docs say "
                 "its peak lies 'between SXM and NVL')",
    "h100-nvl": "NVIDIA H100 NVL datasheet: 94 GB HBM3 3.9 TB/s, BF16 1,671 / FP8 3,341 "
                "TFLOP/s with sparsity (835 / 1,671 dense); capacity as a driver reads it, "
                "99,961,274,368 B (fastfetch-cli/fastfetch issue #1658); a PCIe Gen5 card",
    "h200": "NVIDIA H200 datasheet: BF16 989 / FP8 1,979 TFLOP/s dense (half the sparse "
            "figures); 141 GB HBM3e 4.8 TB/s",
    "gh200": "NVIDIA GH200 Grace Hopper Superchip datasheet: the H100's compute (BF16 989 / FP8 1,979 "
             "TFLOP/s dense), 96 GB HBM3 4 TB/s; NVLink-C2C to the Grace CPU 900 GB/s (both "
             "directions, 7x PCIe Gen5) - 450 GB/s per direction (10 links x 45 GB/s, Hot "
             "Chips 34)",
    "b200": "NVIDIA DGX B200 / HGX B200 datasheet: FP8 4.5 PFLOP/s, BF16 2.25 PFLOP/s dense "
            "per GPU; 180 GB HBM3e 8 TB/s; NVLink 5 1.8 TB/s (both directions)",
    "mi300x": "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense; "
              "192 GB HBM3 5.3 TB/s",
}


# Board power: the rated TDP / TGP a GPU-hour is counted at, as Meta's and BigScience's
# energy figures count it (a whole run's energy, ledger.run).
POWER_SOURCES = {
    "a100-40gb": "400 W (A100 SXM4): Llama 2 model card, meta-llama/llama-models @ a9c89c47 "
                 "models/llama2/MODEL_CARD.md L43-50 (A100-80GB rows at 400 W)",
    "a100-80gb": "400 W (A100 SXM4): Llama 2 model card L43-50 (rows at 400 W); BLOOM's "
                 "433,196 kWh = 1,082,990 GPU-hours x 0.4 kW (Luccioni et al. 2022, "
                 "arXiv:2211.02001)",
    "h100-sxm": "700 W: Llama 3 (arXiv:2407.21783) sec. 3.3.1 ('each running at 700W TDP'); "
                "Llama 3.1 model card L104 ('H100-80GB (TDP of 700W)'); datasheet 'up to 700W'",
    "h100-96gb": "500 W: Meta's Grand Teton H100 as torchtitan docs/performance.md @d4c86e37 "
                 "line 5 describes it (96GB HBM2e, 500 W)",
    "h100-nvl": "400 W: NVIDIA H100 datasheet, NVL column ('350-400W (configurable)'), at its "
                "maximum",
    "h800": "assumed the H100 SXM board's 700 W (the same SXM5 module; no vendor figure "
            "found, DeepSeek publishes none)",
    "h200": "700 W: NVIDIA's MLPerf system description, mlcommons/inference_results_v4.1 @ "
            "a2f5d66d closed/NVIDIA/systems/H200-SXM-141GBx8_TRT.json ('H200 TGP 700W')",
    "gh200": "1000 W: the superchip module's maximum, Grace CPU and LPDDR5X included "
             "(configurable 450-1000 W; ServeTheHome's report of NVIDIA's figure, secondary)",
    "b200": "1000 W: mlcommons/inference_results_v4.1 @ a2f5d66d closed/NVIDIA/systems/"
            "B200-SXM-180GBx1_TRT.json ('B200 TGP 1000W')",
    "mi300x": "750 W: AMD's MLPerf system, mlcommons/inference_results_v4.1 @ a2f5d66d "
              "closed/AMD/systems/8xMI300X_2xEPYC-9374F.json ('MI300X-NPS1-SPX-192GB-750W')",
}

@dataclass(frozen=True, kw_only=True)
class System:
    """A cluster: identical nodes of ``gpus_per_node`` GPUs."""

    gpu: GPU
    gpus_per_node: int = 8
    intra_bytes_per_s: float  # NVLink / NVSwitch per GPU, one direction
    inter_bytes_per_s: float  # InfiniBand / RoCE per GPU, one direction
    host_bytes_per_s: float = 64e9  # GPU <-> CPU memory per GPU, one direction (PCIe / C2C)
    host_memory_bytes: float = 32 * 64 * GiB  # a node's CPU memory (HOST_MEMORY)
    # Parameters a node's CPU optimizer updates per second under CPU offload: DeepSpeedCPUAdam
    # (AVX) "reduces the optimizer time from 56 seconds to 8.2 seconds [for] an 11.6B
    # parameter GPT2 model" (its author, DeepSpeed PR #735, 2021-02-08; torch.optim.Adam on
    # the CPU: 56 s) - 1.41e9 a second. torch's own CPU AdamW (FSDP2's offload step) is
    # taken at the same rate, no figure for it being published; a host's own is set in a
    # --system file (cpu_optimizer_Gparams_per_s)
    cpu_optimizer_params_per_s: float = 11.6e9 / 8.2
    intra_latency_s: float = 5e-6
    inter_latency_s: float = 10e-6
    link_efficiency: float = 0.80  # share of nominal bandwidth collectives reach (nccl-tests)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not value > 0:
                raise LedgerError(f.name, f"must be > 0, got {value}")
        if self.link_efficiency > 1:
            raise LedgerError("link_efficiency", f"must be <= 1, got {self.link_efficiency}")

    def bandwidth(self, link):
        """Achieved bytes/s of ``link`` ("nvlink" | "ib", or an array of them)."""
        if isinstance(link, str):
            raw = self.intra_bytes_per_s if link == "nvlink" else self.inter_bytes_per_s
        else:
            raw = np.where(link == "nvlink", self.intra_bytes_per_s, self.inter_bytes_per_s)
        return raw * self.link_efficiency

    def host_bandwidth(self) -> float:
        """Achieved GPU <-> host bytes/s one way (the link efficiency of the fabric)."""
        return self.host_bytes_per_s * self.link_efficiency

    def latency(self, link):
        if isinstance(link, str):
            return self.intra_latency_s if link == "nvlink" else self.inter_latency_s
        return np.where(link == "nvlink", self.intra_latency_s, self.inter_latency_s)


# NVLink per GPU per direction: A100 (NVLink 3) 300 GB/s, H100/H200 (NVLink 4) 450 GB/s
# (H100 NVL: 600 GB/s NVLink bridges, both directions, between a pair),
# B200 (NVLink 5) 900 GB/s, MI300X Infinity Fabric 7 x 64 GB/s. Scale-out: one NIC per
# GPU; HDR 200 Gb/s on Selene-class A100 nodes, NDR 400 Gb/s on H100-class nodes.
_LINKS = {"a100-40gb": (300e9, 25e9), "a100-80gb": (300e9, 25e9), "h100-sxm": (450e9, 50e9),
          "h100-96gb": (450e9, 50e9), "h100-nvl": (300e9, 50e9), "h800": (200e9, 50e9),
          "h200": (450e9, 50e9), "gh200": (450e9, 50e9), "b200": (900e9, 50e9),
          "mi300x": (448e9, 50e9)}  # h800: export-limited NVLink
# The host link per GPU, one direction: PCIe Gen4 x16 16 GT/s x 16 lanes x 128/130 = 31.5
# GB/s (A100); Gen5 x16 63 GB/s, quoted 128 GB/s both ways on the H100 datasheet ("PCIe
# Gen5 128GB/s"), so 64 (H100, H800, H200, B200 and MI300X hosts); GH200's NVLink-C2C
# 450 GB/s per direction (GPU_SOURCES). Nominal: pinned copies reach ~80-90% of it.
HOST_LINKS = {"a100-40gb": 31.5e9, "a100-80gb": 31.5e9, "h100-sxm": 64e9, "h100-96gb": 64e9,
              "h100-nvl": 64e9, "h800": 64e9, "h200": 64e9, "gh200": 450e9, "b200": 64e9,
              "mi300x": 64e9}
# A node's CPU memory, what CPU offload may fill, per GPU: NVIDIA's 8-GPU H200 MLPerf system
# holds 32 x 64 GiB DIMMs (mlcommons/inference_results_v4.1 @ a2f5d66d closed/NVIDIA/systems/
# H200-SXM-141GBx8_TRT.json: "host_memory_capacity": "2 TB", "32x 64GB MTC40F2046S1RC48BA1",
# "accelerator_host_interconnect": "PCIe Gen5 x16"), 256 GiB a GPU, taken for every
# PCIe-attached preset; a GH200 superchip's Grace holds up to 480 GB of LPDDR5X (NVIDIA's
# GH200 product brief; CSCS Alps' nodes carry 128 GB each - set host_memory_GiB).
HOST_MEMORY = {"gh200": 480e9}
HOST_MEMORY_PER_GPU = 32 * 64 * GiB / 8


def system(gpu: str, gpus_per_node: int = 8) -> System:
    """The usual cluster for a GPU preset: 8 per node, NVLink inside, one NIC per GPU."""
    key = gpu.lower()
    if key not in GPUS:
        raise LedgerError("gpu", f"unknown GPU {gpu!r}; presets: {', '.join(GPUS)}")
    intra, inter = _LINKS[key]
    return System(gpu=GPUS[key], gpus_per_node=gpus_per_node, intra_bytes_per_s=intra,
                  inter_bytes_per_s=inter, host_bytes_per_s=HOST_LINKS[key],
                  host_memory_bytes=HOST_MEMORY.get(key, HOST_MEMORY_PER_GPU) * gpus_per_node)
