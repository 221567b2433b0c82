"""Megatron-Core's MoE paged stash (``ParallelConfig.paged_stash``): where a dropless MoE
under a full-iteration CUDA graph keeps its routed experts' saved activations.

A CUDA graph needs static shapes, so under ``moe_expert_rank_capacity_factor`` a rank's
expert rows are a static buffer of that factor times the average rows
(megatron/core/transformer/moe/experts.py L643-660 @ Megatron-LM cd4afffa, the commit
Megatron-Bridge 0.6.0 pins: ``max_num_tokens`` the padded rows, ``avg_num_tokens`` them
over the factor). Every tensor the fused grouped MLP saves for backward passes through a
saved-tensors hook (paged_stash.py L679-773) and, once the layer's experts have run, a
copy kernel moves its actual rows into pages of one stash buffer shared by every layer
(L193-244, L473-497: on a pack stream; the next MoE layer's experts wait for it, L296-308)
and the padded original is freed (L499-509); before the layer's backward a pop kernel
copies them back into a freshly allocated padded tensor (L246-293, L511-545, on the same
stream, waited for before the layer's backward, L362-376). The stash buffer is sized at
capture by the in-flight rows: ``moe_paged_stash_buffer_size_factor_cuda`` times the
average-based peak when positive, the actual peak when negative (L546-628, default 1.10,
transformer_config.py L1268-1286); ``..._cpu`` adds a pinned host buffer for overflow
(0: none). Megatron requires the capacity factor with it (transformer_config.py
L1904-1920).

What the ledger prices: the stash's CUDA buffer as one buffer kept for the run
(``ledger.placement.stash``: allocated at capture, there at the optimizer step and after
it), ``buffer`` times the routed experts' saved bytes of every MoE layer in flight at the
rank's peak, the layers' own activations without those bytes (``ledger.placement.layers``),
and the layer computing or being reloaded holding its rows padded to ``capacity`` (its
working set). The pinned host buffer for overflow (``..._factor_cpu``, 1.0 on the 26.08
Qwen3-30B rows) is not priced: the ledger has no per-rank host-memory term for it.
The copies (each stashed byte read and written once in the forward and once in the
backward) run on their own stream under the following layers' work and are not priced as
time; the HBM bandwidth they take from that work is not priced either.
"""
from __future__ import annotations

from ledger.errors import LedgerError


def check_paged_stash(cfg) -> None:
    """``paged_stash``: None, or (buffer, capacity) with buffer > 0 and capacity >= 1."""
    got = getattr(cfg, "paged_stash", None)
    if got is None:
        return
    ok = isinstance(got, tuple) and len(got) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in got)
    if not ok or got[0] <= 0 or got[1] < 1:
        raise LedgerError("paged_stash", f"must be (stash buffer / average rows > 0, a rank's "
                                         f"static rows / average >= 1), got {got!r}")


def of_megatron(stash, buffer, capacity) -> tuple[float, float] | None:
    """The stash a Megatron config runs: None unless ``moe_paged_stash``; the CUDA buffer
    factor (Megatron's default 1.10; a negative one sizes by the actual peak, priced as its
    magnitude) and the rank capacity factor."""
    if stash is not True or not isinstance(capacity, (int, float)) or capacity < 1:
        return None
    buffer = 1.10 if not isinstance(buffer, (int, float)) or buffer == 0 else abs(buffer)
    return float(buffer), float(capacity)
