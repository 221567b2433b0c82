"""Hardware: GPU presets and clusters (nodes of GPUs, an intra- and an inter-node link).

Units live in the names: ``_flops`` is FLOP/s, ``_bytes`` bytes, ``_bytes_per_s`` bytes
per second, ``_s`` seconds. Figures are the vendors' datasheet numbers (dense, no
sparsity); link bandwidths are per GPU, one direction.
"""
from __future__ import annotations

import json
import math
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
# (cuBLAS on 8k-sized GEMMs, ~250 of 312 TFLOP/s), which is what bounds end-to-end MFU.
# H100 SXM 0.62: fitted by benchmarks/fit.py (stage 2) on Megatron-LM's H100 table, a
# declared calibration set (ledger.validation); H800 and H200 share its GH100 die and
# clocks and take the same figure. The others take their generation's figure.
GPUS = {g.name: g for g in (
    GPU(name="a100-40gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=40 * GiB,
        hbm_bytes_per_s=1.555e12, gemm_efficiency=0.80),
    GPU(name="a100-80gb", bf16_flops=312e12, fp8_flops=0.0, hbm_bytes=80 * GiB,
        hbm_bytes_per_s=2.039e12, gemm_efficiency=0.80),
    GPU(name="h100-sxm", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=0.62),
    GPU(name="h800", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=81559 * MiB,
        hbm_bytes_per_s=3.35e12, gemm_efficiency=0.62),
    GPU(name="h200", bf16_flops=989e12, fp8_flops=1979e12, hbm_bytes=143771 * MiB,
        hbm_bytes_per_s=4.8e12, gemm_efficiency=0.62),
    GPU(name="b200", bf16_flops=2250e12, fp8_flops=4500e12, hbm_bytes=180 * GiB,
        hbm_bytes_per_s=8.0e12, gemm_efficiency=0.70),
    GPU(name="mi300x", bf16_flops=1307e12, fp8_flops=2615e12, hbm_bytes=192 * GiB,
        hbm_bytes_per_s=5.3e12, gemm_efficiency=0.60),
)}


# Where each preset's peaks come from (dense, no sparsity: the datasheets' sparse FP8
# figures are twice these). The A100 has no FP8 tensor cores, so its fp8 peak is 0.
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
    "h200": "NVIDIA H200 datasheet: BF16 989 / FP8 1,979 TFLOP/s dense (half the sparse "
            "figures); 141 GB HBM3e 4.8 TB/s",
    "b200": "NVIDIA DGX B200 / HGX B200 datasheet: FP8 4.5 PFLOP/s, BF16 2.25 PFLOP/s dense "
            "per GPU; 180 GB HBM3e 8 TB/s; NVLink 5 1.8 TB/s (both directions)",
    "mi300x": "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense; "
              "192 GB HBM3 5.3 TB/s",
}


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
          "h800": (200e9, 50e9), "h200": (450e9, 50e9), "b200": (900e9, 50e9),
          "mi300x": (448e9, 50e9)}  # h800: export-limited NVLink (GPU_SOURCES)


def system(gpu: str, gpus_per_node: int = 8) -> System:
    """The usual cluster for a GPU preset: 8 per node, NVLink inside, one NIC per GPU."""
    key = gpu.lower()
    if key not in GPUS:
        raise LedgerError("gpu", f"unknown GPU {gpu!r}; presets: {', '.join(GPUS)}")
    intra, inter = _LINKS[key]
    return System(gpu=GPUS[key], gpus_per_node=gpus_per_node, intra_bytes_per_s=intra,
                  inter_bytes_per_s=inter)


def _read_table(path: Path) -> dict:
    """The file's top-level table, or a one-line refusal saying what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(
            text, parse_constant=lambda c: _refuse_constant(path, c))
    except FileNotFoundError:
        raise LedgerError("system", f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise LedgerError("system", f"{path} is not text (JSON or TOML expected)") from None
    except OSError as e:
        raise LedgerError("system", f"cannot read {path}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise LedgerError("system", f"{path} is not valid {path.suffix[1:] or 'JSON'}: {e}") \
            from None
    if not isinstance(raw, dict):
        raise LedgerError("system", f"{path} must hold a table of keys, got a "
                                    f"{type(raw).__name__}")
    return raw


def _refuse_constant(path: Path, name: str):
    raise LedgerError("system", f"{path} holds {name}, which is not a number")


# Shares of a peak: a sustained fraction lies in (0, 1]. Every other figure is bounded by
# 1e9 in the unit its key names (TFLOP/s, GB/s, us, GiB), far past any hardware.
_FRACTIONS = ("gpu_gemm_efficiency", "link_efficiency")
_LIMIT = 1e9


def _number(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LedgerError(key, f"must be a number, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise LedgerError(key, f"must be a positive finite number, got {value!r}")
    if key in _FRACTIONS and value > 1:
        raise LedgerError(key, f"is a share of peak and must lie in (0, 1], got {value!r}")
    if value > _LIMIT:
        raise LedgerError(key, f"must be at most {_LIMIT:g} in its unit, got {value!r}")
    return float(value)


def _base(raw: dict, path: Path, gpus_per_node: int | None) -> System:
    """The preset the file starts from, with its node size (the flag must agree)."""
    gpu = raw.pop("gpu", "h100-sxm")
    if not isinstance(gpu, str):
        raise LedgerError("gpu", f"must be a GPU preset name ({', '.join(GPUS)}), got {gpu!r}")
    node = raw.pop("gpus_per_node", None)
    if node is not None and (isinstance(node, bool) or not isinstance(node, int)
                             or not 1 <= node <= 1024):
        raise LedgerError("gpus_per_node", f"must be an integer in 1..1,024, got {node!r}")
    if node is not None and gpus_per_node is not None and node != gpus_per_node:
        raise LedgerError("gpus_per_node", f"given twice: --gpus-per-node {gpus_per_node} "
                                           f"and {node} in {path}; drop one")
    return system(gpu, node or gpus_per_node or 8)


def load_system(path: str | Path, gpus_per_node: int | None = None) -> System:
    """A custom system from JSON or TOML with units in the keys, e.g.

    gpu = "h100-sxm"            # a preset to start from, or the gpu_* keys below
    gpus_per_node = 8
    intra_GBps = 450            # NVLink per GPU, one direction
    inter_GBps = 50             # network per GPU, one direction
    intra_latency_us = 5
    inter_latency_us = 10
    link_efficiency = 0.8       # a share, in (0, 1]
    gpu_bf16_tflops = 989       # optional overrides of the preset GPU
    gpu_hbm_GiB = 80
    gpu_hbm_TBps = 3.35
    gpu_gemm_efficiency = 0.7   # a share, in (0, 1]

    ``gpus_per_node`` (the CLI's flag) applies when the file does not set it.
    """
    path = Path(path)
    raw = _read_table(path)
    base = _base(raw, path, gpus_per_node)
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
        name, scale = table[key]
        (gpu_over if table is gpu_keys else sys_over)[name] = _number(key, value) * scale
    return replace(base, gpu=replace(base.gpu, name=base.gpu.name + "*" * bool(gpu_over),
                                     **gpu_over), **sys_over)
