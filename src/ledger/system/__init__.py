"""Hardware: GPU presets and clusters - hosts of GPUs in scale-up domains, an intra-domain
and an inter-domain link.

A *host* (a node: one OS, its CPU memory, its NICs, what fails and checkpoints together)
holds ``gpus_per_node`` GPUs; a *scale-up domain* (the GPUs one NVLink / NVSwitch fabric
joins) holds ``gpus_per_domain`` of them, a whole number of hosts: 8 in an 8-GPU DGX /
HGX host (domain = host), 72 in a GB200 / GB300 NVL72 rack of 18 hosts of 4. Links are
priced by domain (NVLink inside, the NICs between), host memory, CPU offload, NICs,
checkpoint writes and failures by host.

Units live in the names: ``_flops`` is FLOP/s, ``_bytes`` bytes, ``_bytes_per_s`` bytes
per second, ``_s`` seconds. Figures are the vendors' datasheet numbers (dense, no
sparsity); link bandwidths are per GPU, one direction. Every figure's source is in
``ledger.system.sources``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ledger.errors import LedgerError
from ledger.system.chips import GPU, GPUS, GiB, MiB
from ledger.system.sources import (A2A_SOURCES, ATTENTION_SOURCES, FLEX_SOURCES,
                                   GPU_SOURCES, HOST_CPU_SOURCES, LINK_SOURCES,
                                   POWER_SOURCES)

__all__ = ["A2A", "A2A_SOURCES", "ATTENTION_SOURCES", "FLEX_INTER", "FLEX_INTRA",
           "FLEX_SOURCES", "GPU", "GPUS", "GPU_SOURCES",
           "HOST_CPU_SOURCES", "HOST_CPUS", "LINK_SOURCES", "POWER_SOURCES", "GiB", "MiB",
           "System", "system", "SYSTEMS"]


# the host CPUs a system names (HOST_CPU_SOURCES): an x86 server CPU (DGX / HGX hosts) or
# NVIDIA Grace (Arm Neoverse V2: GH200, GB200 / GB300 NVL72 trays)
HOST_CPUS = ("x86", "grace")


@dataclass(frozen=True, kw_only=True)
class System:
    """A cluster: identical hosts (nodes) of ``gpus_per_node`` GPUs, joined in scale-up
    domains of ``gpus_per_domain`` GPUs (default: one host)."""

    gpu: GPU
    gpus_per_node: int = 8  # GPUs per host: its CPU memory, NICs, checkpoints, failures
    gpus_per_domain: int | None = None  # GPUs one NVLink fabric joins; None: one host
    intra_bytes_per_s: float  # NVLink / NVSwitch per GPU, one direction
    inter_bytes_per_s: float  # InfiniBand / RoCE per GPU, one direction
    host_bytes_per_s: float = 64e9  # GPU <-> CPU memory per GPU, one direction (PCIe / C2C)
    host_memory_bytes: float = 32 * 64 * GiB  # a host's CPU memory (HOST_MEMORY)
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
    # NCCL's all-to-all (grouped sends and receives: torch all_to_all_single, which
    # Megatron's alltoall dispatcher issues) as nccl-tests measure it on the preset's
    # system, a share of nominal, inside and between domains (``A2A``); None:
    # ``link_efficiency``
    a2a_intra_efficiency: float | None = None
    a2a_inter_efficiency: float | None = None
    nvls: bool = False  # NVLink SHARP in the domain's switches (NCCL's NVLS algorithm)
    # the host's CPU, which runs the framework's Python and the kernel launches: "x86" or
    # "grace" (Arm Neoverse V2); its seconds per eager block are ledger.step.host's, a Grace
    # host's scaled by the fitted Calibration.grace_host_scale (HOST_CPU_SOURCES)
    host_cpu: str = "x86"

    def __post_init__(self) -> None:
        if self.gpus_per_domain is None:
            object.__setattr__(self, "gpus_per_domain", self.gpus_per_node)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and not value > 0:
                raise LedgerError(f.name, f"must be > 0, got {value}")
        for name in ("link_efficiency", "a2a_intra_efficiency", "a2a_inter_efficiency"):
            if (getattr(self, name) or 0) > 1:
                raise LedgerError(name, f"must be <= 1, got {getattr(self, name)}")
        if self.host_cpu not in HOST_CPUS:
            raise LedgerError("host_cpu", f"must be one of {', '.join(HOST_CPUS)}, got "
                                          f"{self.host_cpu!r}")
        if self.gpus_per_domain % self.gpus_per_node:
            raise LedgerError("gpus_per_domain", f"a domain is whole hosts: gpus_per_domain("
                                                 f"{self.gpus_per_domain}) is not a multiple "
                                                 f"of gpus_per_node({self.gpus_per_node})")

    @property
    def hosts_per_domain(self) -> int:
        return self.gpus_per_domain // self.gpus_per_node

    def bandwidth(self, link):
        """Achieved bytes/s of ``link`` ("nvlink" | "ib", or an array of them)."""
        if isinstance(link, str):
            raw = self.intra_bytes_per_s if link == "nvlink" else self.inter_bytes_per_s
        else:
            raw = np.where(link == "nvlink", self.intra_bytes_per_s, self.inter_bytes_per_s)
        return raw * self.link_efficiency

    def a2a_bandwidth(self, link):
        """Achieved bytes/s of NCCL's all-to-all on ``link`` (as ``bandwidth``): the share
        nccl-tests' alltoall_perf reaches on the preset's system (``A2A``), else
        ``link_efficiency``."""
        intra = self.a2a_intra_efficiency or self.link_efficiency
        inter = self.a2a_inter_efficiency or self.link_efficiency
        if isinstance(link, str):
            return (self.intra_bytes_per_s * intra if link == "nvlink"
                    else self.inter_bytes_per_s * inter)
        return np.where(link == "nvlink", self.intra_bytes_per_s * intra,
                        self.inter_bytes_per_s * inter)

    def host_bandwidth(self) -> float:
        """Achieved GPU <-> host bytes/s one way (the link efficiency of the fabric)."""
        return self.host_bytes_per_s * self.link_efficiency

    def latency(self, link):
        if isinstance(link, str):
            return self.intra_latency_s if link == "nvlink" else self.inter_latency_s
        return np.where(link == "nvlink", self.intra_latency_s, self.inter_latency_s)


@dataclass(frozen=True)
class Platform:
    """The usual system of a GPU preset: its hosts, scale-up domain, links and NICs
    (``LINK_SOURCES`` says where each figure comes from)."""

    gpus_per_node: int  # GPUs per host
    gpus_per_domain: int  # GPUs per scale-up (NVLink) domain
    intra_bytes_per_s: float  # scale-up link per GPU, one direction
    nics_per_node: int  # scale-out NICs per host
    nic_bits_per_s: float  # each NIC's line rate
    host_bytes_per_s: float  # GPU <-> CPU link per GPU, one direction
    host_memory_per_gpu_bytes: float  # the host's CPU memory over its GPUs
    nvls: bool  # NVSwitch with NVLink SHARP (NCCL's NVLS)
    host_cpu: str = "x86"  # the host's CPU (HOST_CPUS; HOST_CPU_SOURCES)

    @property
    def inter_bytes_per_s(self) -> float:
        """Scale-out bytes per GPU per second, one direction: the host's NICs shared."""
        return self.nics_per_node * self.nic_bits_per_s / 8 / self.gpus_per_node


# Host memory per GPU where no system file of the preset names it: NVIDIA's 8-GPU H200
# MLPerf host, 32 x 64 GiB (LINK_SOURCES["h200"]), 256 GiB a GPU.
HOST_MEMORY_PER_GPU = 32 * 64 * GiB / 8
_G = 1e9  # GB/s
SYSTEMS = {
    # name: hosts, domain, scale-up per GPU, NICs, Gb/s, host link, host memory/GPU, NVLS
    "a100-40gb": Platform(8, 8, 300 * _G, 8, 200e9, 31.5 * _G, HOST_MEMORY_PER_GPU, False),
    "a100-80gb": Platform(8, 8, 300 * _G, 8, 200e9, 31.5 * _G, HOST_MEMORY_PER_GPU, False),
    "h100-sxm": Platform(8, 8, 450 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "h800": Platform(8, 8, 200 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "h100-96gb": Platform(8, 8, 450 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "h100-nvl": Platform(8, 8, 300 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, False),
    "h200": Platform(8, 8, 450 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "h20": Platform(8, 8, 450 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "gh200": Platform(8, 8, 450 * _G, 8, 400e9, 450 * _G, 480e9, False, "grace"),
    "b200": Platform(8, 8, 900 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "b300": Platform(8, 8, 900 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, True),
    "gb200": Platform(4, 72, 900 * _G, 4, 400e9, 225 * _G, 960e9 / 4, True, "grace"),
    "gb300": Platform(4, 72, 900 * _G, 4, 800e9, 225 * _G, 960e9 / 4, True, "grace"),
    "mi300x": Platform(8, 8, 448 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, False),
    "mi325x": Platform(8, 8, 448 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, False),
    "mi355x": Platform(8, 8, 537.6 * _G, 8, 400e9, 64 * _G, 24 * 128 * GiB / 8, False),
    "l40s": Platform(8, 8, 31.5 * _G, 2, 10e9, 31.5 * _G, 16 * 64 * GiB / 8, False),
    "l4": Platform(8, 8, 31.5 * _G, 1, 100e9, 31.5 * _G, HOST_MEMORY_PER_GPU, False),
    "rtx-pro-6000": Platform(8, 8, 64 * _G, 8, 400e9, 64 * _G, HOST_MEMORY_PER_GPU, False),
}

# NCCL's all-to-all as nccl-tests' alltoall_perf measures it: busbw (the bytes that leave
# the GPU over the time) over the link's nominal rate per direction, (in the NVLink
# domain, between domains), each figure's source in ``A2A_SOURCES``. Hopper's NVLink 4: NCCL's 370 of 450 GB/s for
# every operation but the all-reduce; NVLink 5 at the largest message each table gives:
# an 8-GPU HGX B300 675.55 of 900 (B200: the same NVSwitch generation, assumed), 64 GPUs
# of a GB200 NVL72 rack 622.92, of a GB300 rack 666.92; between domains one NIC's worth
# per GPU (all-to-all does not aggregate NICs), 41.66 of 50 GB/s over 3 GB200 racks.
_NIC_A2A = 62.49 * 2 / 3 / 50  # busbw x (N - 1) / N over N = 3 domains, a 50 GB/s NIC
_HOPPER_A2A = (370 / 450, _NIC_A2A)
_HGX_B_A2A = (675.55 / 900, _NIC_A2A)
A2A = {"h100-sxm": _HOPPER_A2A, "h100-96gb": _HOPPER_A2A, "h200": _HOPPER_A2A,
       "h20": _HOPPER_A2A, "b200": _HGX_B_A2A, "b300": _HGX_B_A2A,
       "gb200": (622.92 / 900, _NIC_A2A), "gb300": (666.92 / 900, None)}

# The flex dispatcher's kernels across NICs (DeepEP's normal kernels, HybridEP): the bytes
# that cross a 400 Gb/s (50 GB/s) CX7 NIC per second over its line rate, as their own
# benchmarks measure them (FLEX_SOURCES). Both publish "logical" RDMA bandwidth: a token's
# copy to every node its experts sit on, its own node's included; under their uniform
# routing the own node is 1/N of those copies, so the NIC carries (N - 1)/N of them
# (N nodes). DeepEP, H800: EP 32 dispatch / combine 58 / 57 GB/s, EP 64 51 / 50 (its
# EP 16 line is NVLink-bound); HybridEP, H100, its 8 SMs across nodes, kernel time (as
# inside the domain, FLEX_INTRA), BF16 dispatch / combine: EP 16 76.80 / 68.00, EP 32
# 54.50 / 56.40, EP 64 50.55 / 51.03, its dispatch also carrying each copy's fp32 probs of
# the 8 x 8 experts on a node's GPUs.
_HYBRIDEP_PROBS = 1 + 8 * 8 * 4 / (7168 * 2)
FLEX_INTER = {
    "deepep": ((58 + 57) * 3 / 4 + (51 + 50) * 7 / 8) / 4 / 50,
    "hybridep": ((76.80 * _HYBRIDEP_PROBS + 68.00) / 2
                 + (54.50 * _HYBRIDEP_PROBS + 56.40) * 3 / 4
                 + (50.55 * _HYBRIDEP_PROBS + 51.03) * 7 / 8) / 6 / 50,
}

# HybridEP inside an NVLink domain: the bytes its TMA kernels put on the scale-up link per
# second over the link's nominal rate, as its own benchmark measures them (FLEX_SOURCES):
# GB200 NVL72, 32 SMs (Megatron-Bridge's, render.bridge_launch.PERF_HYBRIDEP_SMS), kernel
# time, BF16 dispatch / combine algbw at 8, 16, 24, 32, 36 ranks. algbw counts a rank's
# received tokens x 7168 x 2 B, its own copies included; the dispatch also carried each
# copy's fp32 probs of the 8 x L experts on the L ranks; the link carries (L - 1)/L of it.
_HYBRIDEP_GB200 = ((8, 764.03, 737.13), (16, 706.95, 666.26), (24, 665.97, 639.80),
                   (32, 642.23, 605.15), (36, 632.31, 596.99))
FLEX_INTRA = {
    "hybridep": sum((d * (1 + 8 * n * 4 / (7168 * 2)) + c) * (n - 1) / n
                    for n, d, c in _HYBRIDEP_GB200) / 10 / 900,
}


def system(gpu: str, gpus_per_node: int | None = None,
           gpus_per_domain: int | None = None) -> System:
    """The usual cluster of a GPU preset (``SYSTEMS``): its hosts, domain, links and NICs.
    ``gpus_per_node`` resizes the host (and, where the domain is one host, the domain);
    ``gpus_per_domain`` the scale-up domain."""
    key = gpu.lower()
    if key not in GPUS:
        raise LedgerError("gpu", f"unknown GPU {gpu!r}; presets: {', '.join(GPUS)}")
    p = SYSTEMS[key]
    host = gpus_per_node or p.gpus_per_node
    one_host = p.gpus_per_domain == p.gpus_per_node
    domain = gpus_per_domain or (host if one_host else p.gpus_per_domain)
    return System(gpu=GPUS[key], gpus_per_node=host, gpus_per_domain=domain,
                  intra_bytes_per_s=p.intra_bytes_per_s,
                  inter_bytes_per_s=p.inter_bytes_per_s, host_bytes_per_s=p.host_bytes_per_s,
                  host_memory_bytes=p.host_memory_per_gpu_bytes * host, nvls=p.nvls,
                  host_cpu=p.host_cpu,
                  **dict(zip(("a2a_intra_efficiency", "a2a_inter_efficiency"),
                             A2A.get(key, (None, None)))))
