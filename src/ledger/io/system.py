"""``--system FILE``: a cluster read from JSON or TOML, with units in the keys, starting
from a GPU preset of ``ledger.system``. Every refusal is one line naming the key."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ledger.errors import LedgerError
from ledger.io.files import read_table
from ledger.system import GPUS, GiB, System, system


# Shares of a peak: a sustained fraction lies in (0, 1]. Every figure is bounded by 1e9 in
# the unit its key names (TFLOP/s, GB/s, us, GiB), far past any hardware, and by 1e-6 below
# (a micro-share of peak, 1 MB/s of HBM): a figure that small is a typo, and past it the
# GEMM model's efficiency underflows to zero and a step takes no finite time.
_FRACTIONS = ("gpu_gemm_efficiency", "link_efficiency")
_LIMIT = 1e9
_FLOOR = 1e-6


def _number(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LedgerError(key, f"must be a number, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise LedgerError(key, f"must be a positive finite number, got {value!r}")
    if key in _FRACTIONS and value > 1:
        raise LedgerError(key, f"is a share of peak and must lie in (0, 1], got {value!r}")
    if value > _LIMIT:
        raise LedgerError(key, f"must be at most {_LIMIT:g} in its unit, got {value!r}")
    if value < _FLOOR:
        raise LedgerError(key, f"must be at least {_FLOOR:g} in its unit, got {value!r}")
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
    return system(gpu, node or gpus_per_node)


def load_system(path: str | Path, gpus_per_node: int | None = None) -> System:
    """A custom system from JSON or TOML with units in the keys, e.g.

    gpu = "h100-sxm"            # a preset to start from, or the gpu_* keys below
    gpus_per_node = 8
    intra_GBps = 450            # NVLink per GPU, one direction
    inter_GBps = 50             # network per GPU, one direction
    host_GBps = 64              # GPU <-> CPU per GPU, one direction (PCIe Gen5 x16; GH200 450)
    host_memory_GiB = 2048      # CPU memory per node (what CPU offload may fill)
    cpu_optimizer_Gparams_per_s = 1.41  # parameters a node's CPU optimizer steps a second
    intra_latency_us = 5
    inter_latency_us = 10
    link_efficiency = 0.8       # a share, in (0, 1]
    gpu_bf16_tflops = 989       # optional overrides of the preset GPU
    gpu_hbm_GiB = 80
    gpu_hbm_TBps = 3.35
    gpu_gemm_efficiency = 0.7   # a share, in (0, 1]
    gpu_board_power_W = 700     # board power a GPU-hour draws (a whole run's energy)

    ``gpus_per_node`` (the CLI's flag) applies when the file does not set it.
    """
    path = Path(path)
    raw = read_table(path, "system")
    base = _base(raw, path, gpus_per_node)
    gpu_keys = {"gpu_bf16_tflops": ("bf16_flops", 1e12), "gpu_fp8_tflops": ("fp8_flops", 1e12),
                "gpu_hbm_GiB": ("hbm_bytes", GiB), "gpu_hbm_TBps": ("hbm_bytes_per_s", 1e12),
                "gpu_gemm_efficiency": ("gemm_efficiency", 1.0),
                "gpu_board_power_W": ("board_power_w", 1.0)}
    sys_keys = {"intra_GBps": ("intra_bytes_per_s", 1e9), "inter_GBps": ("inter_bytes_per_s", 1e9),
                "host_GBps": ("host_bytes_per_s", 1e9),
                "host_memory_GiB": ("host_memory_bytes", GiB),
                "cpu_optimizer_Gparams_per_s": ("cpu_optimizer_params_per_s", 1e9),
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
