"""``--system FILE``: a cluster read from JSON or TOML, with units in the keys, starting
from a GPU preset of ``ledger.system``. Every refusal is one line naming the key."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ledger.errors import LedgerError
from ledger.io.files import read_table
from ledger.io.limits import MAX_GPUS_PER_DOMAIN, MAX_GPUS_PER_NODE
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


# Every key a --system file may hold besides gpu, gpus_per_node, gpus_per_domain and nvls
# (docs/systems.md documents each): the file's name -> (the field it sets, its unit)
GPU_KEYS = {"gpu_bf16_tflops": ("bf16_flops", 1e12), "gpu_fp8_tflops": ("fp8_flops", 1e12),
            "gpu_fp4_tflops": ("fp4_flops", 1e12),
            "gpu_hbm_GiB": ("hbm_bytes", GiB), "gpu_hbm_TBps": ("hbm_bytes_per_s", 1e12),
            "gpu_gemm_efficiency": ("gemm_efficiency", 1.0),
            "gpu_board_power_W": ("board_power_w", 1.0)}
SYS_KEYS = {"intra_GBps": ("intra_bytes_per_s", 1e9), "inter_GBps": ("inter_bytes_per_s", 1e9),
            "host_GBps": ("host_bytes_per_s", 1e9),
            "host_memory_GiB": ("host_memory_bytes", GiB),
            "cpu_optimizer_Gparams_per_s": ("cpu_optimizer_params_per_s", 1e9),
            "intra_latency_us": ("intra_latency_s", 1e-6),
            "inter_latency_us": ("inter_latency_s", 1e-6),
            "link_efficiency": ("link_efficiency", 1.0)}
SYSTEM_KEYS = ("gpu", "gpus_per_node", "gpus_per_domain", "nvls", *SYS_KEYS, *GPU_KEYS)


def _count(key: str, value, limit: int) -> int:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 1 <= value <= limit):
        raise LedgerError(key, f"must be an integer in 1..{limit:,}, got {value!r}")
    return value


def _base(raw: dict, path: Path, gpus_per_node: int | None,
          gpus_per_domain: int | None) -> System:
    """The preset the file starts from, with its host and domain sizes (the flags must
    agree)."""
    gpu = raw.pop("gpu", "h100-sxm")
    if not isinstance(gpu, str):
        raise LedgerError("gpu", f"must be a GPU preset name ({', '.join(GPUS)}), got {gpu!r}")
    node = _count("gpus_per_node", raw.pop("gpus_per_node", None), MAX_GPUS_PER_NODE)
    domain = _count("gpus_per_domain", raw.pop("gpus_per_domain", None), MAX_GPUS_PER_DOMAIN)
    for key, mine, flag in (("gpus_per_node", node, gpus_per_node),
                            ("gpus_per_domain", domain, gpus_per_domain)):
        if mine is not None and flag is not None and mine != flag:
            raise LedgerError(key, f"given twice: --{key.replace('_', '-')} {flag} and {mine} "
                                   f"in {path}; drop one")
    return system(gpu, node or gpus_per_node, domain or gpus_per_domain)


def load_system(path: str | Path, gpus_per_node: int | None = None,
                gpus_per_domain: int | None = None) -> System:
    """A custom system from JSON or TOML with units in the keys (docs/systems.md), e.g.

    gpu = "h100-sxm"            # a preset to start from, or the gpu_* keys below
    gpus_per_node = 8           # GPUs per host (node)
    gpus_per_domain = 8         # GPUs per NVLink domain, whole hosts (NVL72: 72)
    nvls = true                 # NVLink SHARP in the domain's switches (NCCL's NVLS)
    intra_GBps = 450            # NVLink per GPU, one direction
    inter_GBps = 50             # network per GPU, one direction
    host_GBps = 64              # GPU <-> CPU per GPU, one direction (PCIe Gen5 x16; GH200 450)
    host_memory_GiB = 2048      # CPU memory per node (what CPU offload may fill)
    cpu_optimizer_Gparams_per_s = 1.41  # parameters a node's CPU optimizer steps a second
    intra_latency_us = 5
    inter_latency_us = 10
    link_efficiency = 0.8       # a share, in (0, 1]
    gpu_bf16_tflops = 989       # optional overrides of the preset GPU
    gpu_fp8_tflops = 1979
    gpu_fp4_tflops = 3958       # (a preset without FP4 has none; 0 is refused)
    gpu_hbm_GiB = 80
    gpu_hbm_TBps = 3.35
    gpu_gemm_efficiency = 0.7   # a share, in (0, 1]
    gpu_board_power_W = 700     # board power a GPU-hour draws (a whole run's energy)

    ``gpus_per_node`` and ``gpus_per_domain`` (the CLI's flags) apply when the file does
    not set them.
    """
    path = Path(path)
    raw = read_table(path, "system")
    base = _base(raw, path, gpus_per_node, gpus_per_domain)
    nvls = raw.pop("nvls", base.nvls)
    if not isinstance(nvls, bool):
        raise LedgerError("nvls", f"must be true or false, got {nvls!r}")
    gpu_over, sys_over = {}, {}
    for key, value in raw.items():
        table = GPU_KEYS if key in GPU_KEYS else SYS_KEYS if key in SYS_KEYS else None
        if table is None:
            raise LedgerError("system", f"unknown key {key!r} in {path}; known: gpu, "
                                        f"gpus_per_node, gpus_per_domain, nvls, "
                                        f"{', '.join([*SYS_KEYS, *GPU_KEYS])}")
        name, scale = table[key]
        (gpu_over if table is GPU_KEYS else sys_over)[name] = _number(key, value) * scale
    # the preset's measured all-to-all shares (ledger.system.A2A) belong to its links as
    # measured: a file that sets a link's rate or the links' efficiency prices that link's
    # all-to-all at link_efficiency
    for side, keys in (("a2a_intra_efficiency", ("intra_bytes_per_s", "link_efficiency")),
                       ("a2a_inter_efficiency", ("inter_bytes_per_s", "link_efficiency"))):
        if any(k in sys_over for k in keys):
            sys_over[side] = None
    return replace(base, gpu=replace(base.gpu, name=base.gpu.name + "*" * bool(gpu_over),
                                     **gpu_over), nvls=nvls, **sys_over)
