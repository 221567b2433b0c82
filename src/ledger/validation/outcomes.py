"""The verdict's one fitted figure beyond the fragmentation: of it, the split blocks PyTorch's
caching allocator keeps through a failed cudaMalloc (``Framework.unreturnable``). Reserved
peaks cannot tell them from the cached whole blocks it hands back, so outcomes bound them:
a run that ran fits, a run out of memory does not. Each outcome row gives the largest
share at which its worst rank still fits (``MemoryBreakdown.critical_share``, from its
allocated bytes and context alone); benchmarks/fit_memory.py ships the midpoint of what
they allow (``fit_unreturnable``), on this package's measured-memory outcome rows
(``ledger.validation.memory.peaks``) and the Megatron-Bridge tables' rows
(``ledger.render.bridge_fit.outcome_shares``)."""
from __future__ import annotations

from ledger.validation.memory import _placed, peaks


def outcome_shares(rows=None) -> list[tuple[str, bool, float]]:
    """(label, ran, the largest unreturnable share at which the ledger says it fits) of
    each outcome row (``MemoryBreakdown.critical_share`` at the worst rank): a run that ran
    bounds ``Framework.unreturnable`` from above, one out of memory from below."""
    from ledger.system import system

    rows = peaks() if rows is None else rows
    return [(r.label, r.measured == 1.0,
             min(m.critical_share(system(r.gpu).gpu.hbm_bytes)
                 for m in _placed(r).memory_by_rank))
            for r in rows if r.metric == "outcome"]


def share_bounds(items) -> tuple[tuple[float, str], tuple[float, str], list[str]]:
    """The unreturnable shares every verdict of ``items`` ((label, ran, critical share))
    allows: (the largest share an out-of-memory run needs to fail, its label), (the
    smallest share a run that ran needs to fit, its label), and the rows no share in the
    fragmentation's range judges right (bounding nothing: an out-of-memory run no share
    fails, a run whose allocated bytes and context alone overflow the device)."""
    inf = float("inf")
    oom = [(c, lab) for lab, ran, c in items if not ran and c < inf]
    ran = [(c, lab) for lab, ran, c in items if ran and 0.0 <= c < inf]  # < 0: none fits
    lo = max(oom, default=(0.0, ""))
    hi = min(ran, default=(inf, ""))
    wrong = [lab for lab, r, c in items if (not r and c == inf) or (r and c < 0)]
    return lo, hi, wrong


def fit_unreturnable(items) -> float:
    """benchmarks/fit_memory.py's rule: the midpoint of the shares every outcome allows,
    to 0.1% (``share_bounds``)."""
    (lo, _), (hi, _), _ = share_bounds(items)
    return round((max(lo, 0.0) + hi) / 2, 3)


__all__ = ["fit_unreturnable", "outcome_shares", "share_bounds"]
