"""NCCL's NVLink SHARP (NVLS) buffers, allocated by NCCL through the CUDA driver outside
PyTorch's allocator (NVIDIA/nccl 5067397c), as a named term of the device's context.

What the flat context (``Framework.overhead_bytes``, SOURCES["overhead_bytes"]) already
holds is the CUDA context and NCCL's ring and tree buffers: 4 MiB SIMPLE + 0.5 MiB LL +
4.69 MiB LL128 per channel and peer (src/init.cc L810-828). Their total needs the channel
count NCCL's topology search picks at run time (src/graph/search.cc) and the connections
made lazily on first use (NCCL_RUNTIME_CONNECT=1, init.cc L61): not derivable from a
launch, so they stay the flat figure.

NVLS buffers are derivable and come on top (nvls.cc ``ncclNvlsBufferSetup``, L409-430):
per communicator, ``nChannels x 2 x buffSize x nHeads`` with buffSize = the NVLS chunk
(128 KiB, NCCL_NVLS_CHUNKSIZE, L160) x NCCL_STEPS (8), and nChannels 16 on Hopper, 24 on
Blackwell inside one NVLink domain (32 across nodes; L155-157, L209-214). nHeads is the
communicator's ranks in the domain (connect.cc L248-262: one head per local rank in the
NVLS graph). NVLS runs only where NCCL_NVLS_ENABLE allows it (default 2: on where the
switches multicast, L159, L245-275) and, as the step model prices it (``ledger.step.
nccl``), for the all-reduce, all-gather and reduce-scatter of a group inside one domain:
the TP group, the data-parallel (dp x cp) group and the experts' data-parallel group.
Megatron-Bridge's launcher sets NCCL_NVLS_ENABLE=0 (nemo_run executors.py L44 @v0.5.1),
so its rows hold none. The driver rounds each allocation to its multicast granularity
(L314-352, a runtime value): priced unrounded, a lower bound.
"""
from __future__ import annotations

import numpy as np

NVLS_CHUNK = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default (nvls.cc L160)
NCCL_STEPS = 8  # src/include/device.h
NVLS_CHANNELS = {"hopper": 16, "blackwell": 24}  # nvls.cc L155-157, single domain
NAME = "NCCL NVLS buffers"


def nvls_bytes(heads: int, generation: str) -> int:
    """One communicator's NVLS buffer on each of its GPUs (nvls.cc L426-430)."""
    return NVLS_CHANNELS.get(generation, 0) * 2 * NVLS_CHUNK * NCCL_STEPS * heads


def nvls_total(layout, ep, generation: str):
    """NVLS bytes on one GPU of ``layout`` (numbers or the planner's arrays): each TP,
    data-parallel and (ep > 1) expert-data-parallel group of more than one rank whose
    ranks all sit in one NVLink domain."""
    total = 0.0 * np.asarray(layout.tp)
    for group in ("tp", "dp_cp", "edp"):
        span = layout.span(group)
        if span is None:
            continue
        size = np.asarray(span[1])
        whole = (size > 1) & (np.asarray(layout.per_node(group)) == size)
        if group == "edp":
            whole = whole & (np.asarray(ep) > 1)
        total = total + np.where(whole, nvls_bytes(size, generation), 0.0)
    return total if total.shape else float(total)


def nvls_on(cfg_or_flag, nvls: bool, generation: str) -> bool:
    """NCCL runs NVLS: the switches multicast (``nvls``), NCCL_NVLS_ENABLE is not 0 and
    the GPU's generation has NVLS channels."""
    flag = getattr(cfg_or_flag, "nccl_nvls", cfg_or_flag)
    return bool(nvls) and flag is not False and generation in NVLS_CHANNELS


def nccl_buffers(cfg, layout, generation: str, nvls: bool) -> dict[str, float]:
    """Named bytes of NCCL's NVLS buffers on one GPU of ``cfg`` laid out as ``layout`` on a
    system whose switches do (``nvls``) or do not multicast (module docstring)."""
    if not nvls_on(cfg, nvls, generation):
        return {}
    total = nvls_total(layout, cfg.ep, generation)
    return {NAME: total} if total else {}
