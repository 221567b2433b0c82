"""What PyTorch's caching allocator does with a rank's bytes beyond what its tensors hold:
which of them are allocated once for the run (never split), and of its fragmentation what
it hands back before it fails an allocation (SOURCES["allocator_reclaim"]) - the cached
whole blocks always, the split blocks never unless expandable segments unmap their pages.
``ledger.placement.footprint`` prices a rank's points with these."""
from __future__ import annotations


def reclaimable(frag, unreturnable):
    """Of each point's fragmentation, what the caching allocator hands back before it
    fails an allocation: all but the split blocks (``unreturnable``, from
    ``unreturnable_share``: the cached whole blocks - freed logits and gradients, whole
    free segments - are released and the allocation retried; under expandable segments
    the share is 0, every empty page unmapped) - SOURCES["allocator_reclaim"]."""
    return [f - u for f, u in zip(frag, unreturnable)]


def fragmentation_share(cfg, fw) -> float:
    """The run's fragmentation, a share of allocated (``Framework.fragmentation``; under
    torch.compile ``compiled_fragmentation``)."""
    return fw.compiled_fragmentation if getattr(cfg, "compile", False) else fw.fragmentation


def unreturnable_cap(cfg, fw) -> float:
    """The most of a point's allocated bytes the verdict can count as split blocks: the
    fragmentation share, 0 under expandable segments (every empty page unmapped)."""
    return 0.0 if getattr(cfg, "expandable_segments", False) else fragmentation_share(cfg, fw)


def unreturnable_share(cfg, fw) -> float:
    """Of a point's allocated bytes, the split blocks the allocator keeps through a
    failed cudaMalloc (``Framework.unreturnable``, at most ``unreturnable_cap``); 0 under
    expandable segments."""
    return min(unreturnable_cap(cfg, fw), fw.unreturnable)


def persistent_bytes(parts, state, fw):
    """Of a point's allocated bytes (``state`` its state term), those allocated once for
    the run and never freed: the parameters and optimizer state, the gradients where the
    framework keeps them in a buffer of its own (``Framework.grads_persist``) and the
    buffers it keeps (``kept``). The rest - activations, logits, gathered parameters,
    per-step gradients, workspaces - is freed and requested again every step: the only
    blocks the caching allocator reuses and splits (SOURCES["fragmentation"]).
    benchmarks/fit_memory.py fits the fragmentation on either basis."""
    own = parts.params + parts.optim
    return own + parts.kept + (state - own) * fw.grads_persist
