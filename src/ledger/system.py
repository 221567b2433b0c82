"""Hardware: GPU presets and clusters (nodes of GPUs, an intra- and an inter-node link).

Units live in the names: ``_flops`` is FLOP/s, ``_bytes`` bytes, ``_bytes_per_s`` bytes
per second, ``_s`` seconds. Figures are the vendors' datasheet numbers (dense, no
sparsity); link bandwidths are per GPU, one direction.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

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


# gemm_efficiency: the share of peak that large bf16 GEMMs reach in practice; A100 ~ 0.80
# (cuBLAS on 8k-sized GEMMs, ~250 of 312 TFLOP/s), H100 SXM ~ 0.70 (~700 of 989), which is
# what bounds end-to-end MFU. The others take their generation's figure.
GPUS = {g.name: g for g in (
    GPU(name="a100-40gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=40 * GiB,
        hbm_bytes_per_s=1.555e12, gemm_efficiency=0.80),
    GPU(name="a100-80gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=80 * GiB,
        hbm_bytes_per_s=2.039e12, gemm_efficiency=0.80),
    GPU(name="h100-sxm", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=0.70),
    GPU(name="h200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=143771 * MiB,
        hbm_bytes_per_s=4.8e12, gemm_efficiency=0.70),
    GPU(name="b200", bf16_flops=2250e12, fp8_flops=4500e12, hbm_bytes=180 * GiB,
        hbm_bytes_per_s=8.0e12, gemm_efficiency=0.70),
    GPU(name="mi300x", bf16_flops=1307e12, fp8_flops=2615e12, hbm_bytes=192 * GiB,
        hbm_bytes_per_s=5.3e12, gemm_efficiency=0.60),
)}


@dataclass(frozen=True, kw_only=True)
class System:
    """A cluster: identical nodes of ``gpus_per_node`` GPUs."""

    gpu: GPU
    gpus_per_node: int = 8
    intra_bytes_per_s: float  # NVLink / NVSwitch per GPU, one direction
    inter_bytes_per_s: float  # InfiniBand / RoCE per GPU, one direction
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

    def latency(self, link):
        if isinstance(link, str):
            return self.intra_latency_s if link == "nvlink" else self.inter_latency_s
        return np.where(link == "nvlink", self.intra_latency_s, self.inter_latency_s)


# NVLink per GPU per direction: A100 (NVLink 3) 300 GB/s, H100/H200 (NVLink 4) 450 GB/s,
# B200 (NVLink 5) 900 GB/s, MI300X Infinity Fabric 7 x 64 GB/s. Scale-out: one NIC per
# GPU; HDR 200 Gb/s on Selene-class A100 nodes, NDR 400 Gb/s on H100-class nodes.
_LINKS = {"a100-40gb": (300e9, 25e9), "a100-80gb": (300e9, 25e9), "h100-sxm": (450e9, 50e9),
          "h200": (450e9, 50e9), "b200": (900e9, 50e9), "mi300x": (448e9, 50e9)}


def system(gpu: str, gpus_per_node: int = 8) -> System:
    """The usual cluster for a GPU preset: 8 per node, NVLink inside, one NIC per GPU."""
    key = gpu.lower()
    if key not in GPUS:
        raise LedgerError("gpu", f"unknown GPU {gpu!r}; presets: {', '.join(GPUS)}")
    intra, inter = _LINKS[key]
    return System(gpu=GPUS[key], gpus_per_node=gpus_per_node, intra_bytes_per_s=intra,
                  inter_bytes_per_s=inter)


def load_system(path: str | Path) -> System:
    """A custom system from JSON or TOML with units in the keys, e.g.

    gpu = "h100-sxm"            # a preset to start from, or the gpu_* keys below
    gpus_per_node = 8
    intra_GBps = 450            # NVLink per GPU, one direction
    inter_GBps = 50             # network per GPU, one direction
    intra_latency_us = 5
    inter_latency_us = 10
    link_efficiency = 0.8
    gpu_bf16_tflops = 989       # optional overrides of the preset GPU
    gpu_hbm_GiB = 80
    gpu_hbm_TBps = 3.35
    gpu_gemm_efficiency = 0.7
    """
    path = Path(path)
    try:
        text = path.read_text()
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except FileNotFoundError:
        raise LedgerError("system", f"no such file: {path}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise LedgerError("system", f"{path} is not valid {path.suffix[1:] or 'JSON'}: {e}") \
            from None
    base = system(raw.pop("gpu", "h100-sxm"), int(raw.pop("gpus_per_node", 8)))
    gpu_keys = {"gpu_bf16_tflops": ("bf16_flops", 1e12), "gpu_fp8_tflops": ("fp8_flops", 1e12),
                "gpu_hbm_GiB": ("hbm_bytes", GiB), "gpu_hbm_TBps": ("hbm_bytes_per_s", 1e12),
                "gpu_gemm_efficiency": ("gemm_efficiency", 1.0)}
    sys_keys = {"intra_GBps": ("intra_bytes_per_s", 1e9), "inter_GBps": ("inter_bytes_per_s", 1e9),
                "intra_latency_us": ("intra_latency_s", 1e-6),
                "inter_latency_us": ("inter_latency_s", 1e-6),
                "link_efficiency": ("link_efficiency", 1.0)}
    gpu_over, sys_over = {}, {}
    for key, value in raw.items():
        table = gpu_keys if key in gpu_keys else sys_keys if key in sys_keys else None
        if table is None:
            raise LedgerError("system", f"unknown key {key!r} in {path}; known: gpu, "
                                        f"gpus_per_node, {', '.join([*sys_keys, *gpu_keys])}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise LedgerError(key, f"must be a positive number, got {value!r}")
        name, scale = table[key]
        (gpu_over if table is gpu_keys else sys_over)[name] = value * scale
    return replace(base, gpu=replace(base.gpu, name=base.gpu.name + "*" * bool(gpu_over),
                                     **gpu_over), **sys_over)
