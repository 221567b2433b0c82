"""The MoE paged stash's CUDA buffer (``ledger.frameworks.paged_stash``) as a rank keeps it.

Megatron-Core allocates it once, at the full-iteration CUDA graph's capture, and keeps it
for the run: ``allocate_stash_buffers`` sizes one static buffer per (dtype, hidden size)
at ``moe_paged_stash_buffer_size_factor_cuda`` times the peak in-flight rows recorded over
the rank's virtual stages (megatron/core/transformer/moe/paged_stash.py L546-628 @
Megatron-LM cd4afffa), and it is released only at the graph's teardown (L630-). So it is
priced as a kept buffer (``RankParts.kept``: present at the optimizer step and after the
step, never split by the caching allocator), of ``buffer`` times the routed experts' saved
bytes of every MoE layer in flight at the rank's activation peak - the micro-batches in
flight there (the schedule's point) times one micro-batch of the stage's
(``layers.layer_stashed_bytes``) - and the layers' own activations leave those bytes out
(the padded originals are freed once copied into the pages, L499-509). The pinned host
buffer for overflow (``moe_paged_stash_buffer_size_factor_cpu``) is not priced: the ledger
has no per-rank host-memory term for activations.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

NAME = "MoE paged stash"


def stash_buffer_bytes(cfg, stage_stashed, chunks):
    """The stash's CUDA buffer on a rank: ``buffer`` x ``chunks`` (micro-batches in flight at
    the rank's peak) x ``stage_stashed`` (one micro-batch of its MoE layers' routed saved
    bytes); 0 without the stash. Numbers or the planner's arrays."""
    stash = getattr(cfg, "paged_stash", None)
    return 0.0 if stash is None else stash[0] * chunks * stage_stashed


def with_stash(parts, stash_bytes):
    """``parts`` (footprint's RankParts) with the stash buffer among the framework's kept
    buffers: held at every point of the step and after it."""
    if not np.ndim(stash_bytes) and not stash_bytes:
        return parts
    named = parts.named + ((NAME, stash_bytes),) if np.ndim(stash_bytes) == 0 else parts.named
    return replace(parts, buffers=parts.buffers + stash_bytes, kept=parts.kept + stash_bytes,
                   named=tuple(sorted(named)))
