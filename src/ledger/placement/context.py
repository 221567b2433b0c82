"""Buffers other libraries allocate on a GPU outside PyTorch's caching allocator, each a
named term of the device's context (``MemoryBreakdown.context_named``) beside the
framework's flat CUDA context (``Framework.overhead_bytes``): they count toward what the
device holds and toward the fit verdict, never toward ``max_memory_allocated``.

- ``ep_buffers``: DeepEP's / HybridEP's under the flex dispatcher.
- ``nccl_buffers``: NCCL's NVLS buffers (added by ``place``, which knows the layout).
"""
from __future__ import annotations

import numpy as np

from ledger.placement.ep_buffers import ep_buffers


def context_buffers(model, cfg, ep_local: int = 8) -> dict[str, float]:
    """Named bytes one GPU of ``cfg`` holds outside the allocator, beyond the context;
    ``ep_local``: the EP ranks sharing one NVLink domain (HybridEP's
    NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN: the ranks it detects as reachable)."""
    return {k: v for k, v in ep_buffers(model, cfg, ep_local).items() if np.any(v)}
