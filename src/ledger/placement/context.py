"""Buffers other libraries allocate on a GPU outside PyTorch's caching allocator, each a
named term of the device's context (``MemoryBreakdown.context_named``) beside the
framework's flat CUDA context (``Framework.overhead_bytes``): they count toward what the
device holds and toward the fit verdict, never toward ``max_memory_allocated``.

- ``ep_buffers``: DeepEP's / HybridEP's under the flex dispatcher.
"""
from __future__ import annotations

import numpy as np

from ledger.placement.ep_buffers import ep_buffers


def context_buffers(model, cfg) -> dict[str, float]:
    """Named bytes one GPU of ``cfg`` holds outside the allocator, beyond the context."""
    return {k: v for k, v in ep_buffers(model, cfg).items() if np.any(v)}
