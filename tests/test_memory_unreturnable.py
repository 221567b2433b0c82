"""The verdict's allocator share: of the fragmentation, the split blocks PyTorch's caching
allocator keeps through a failed cudaMalloc (``Framework.unreturnable``). Reserved peaks
cannot tell it from the cached whole blocks it hands back, so benchmarks/fit_memory.py
bounds it by the outcome rows - every run that ran fits, every run out of memory does not -
and ships the midpoint."""
import re
from pathlib import Path

import pytest

from ledger.frameworks.conventions import FRAGMENTATION, UNRETURNABLE
from ledger.placement.footprint import MemoryBreakdown
from ledger.render.bridge_fit import outcome_shares as bridge_outcomes
from ledger.render.peaks import unreturnable_table
from ledger.validation.outcomes import fit_unreturnable, outcome_shares, share_bounds

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30


@pytest.fixture(scope="module")
def items():
    return outcome_shares() + bridge_outcomes()


def test_critical_share_by_hand():
    """A rank holding 70 GiB allocated at its worst point and 2 GiB of context fits 80 GiB
    while its split blocks stay within (80 - 2) / 70 - 1 = 11.43% of allocated; past the
    run's fragmentation share (``share_cap``, 9% here) no share fails it (inf), and under
    expandable segments (share_cap 0) none does."""
    m = MemoryBreakdown(0, 40 * GiB, 30 * GiB, 0.0, 0.0, context_bytes=2 * GiB,
                        max_allocated_bytes=70 * GiB, share_cap=0.2)
    assert m.critical_share(80 * GiB) == pytest.approx(78 / 70 - 1, rel=1e-12)  # 11.43%
    assert m.critical_share(75 * GiB) == pytest.approx(73 / 70 - 1, rel=1e-12)
    capped = MemoryBreakdown(0, 40 * GiB, 30 * GiB, 0.0, 0.0, context_bytes=2 * GiB,
                             max_allocated_bytes=70 * GiB, share_cap=0.09)
    assert capped.critical_share(80 * GiB) == float("inf")  # 11.4% > 9%: fits at any share
    assert capped.critical_share(72 * GiB) == 0.0  # allocated + context exactly fill it
    pages = MemoryBreakdown(0, 40 * GiB, 30 * GiB, 0.0, 0.0, context_bytes=2 * GiB,
                            max_allocated_bytes=70 * GiB, share_cap=0.0)
    assert pages.critical_share(75 * GiB) == float("inf")


def test_bounds_by_hand():
    """The rule on made-up verdicts: runs out of memory at 0.5% and 2% need more than 2%,
    runs that ran at 3% and 5% allow at most 3%; the midpoint 2.5% ships. An out-of-memory
    run no share fails (inf) and a run whose allocated bytes alone overflow (< 0) are named."""
    items = [("a", False, 0.005), ("b", False, 0.02), ("c", True, 0.03), ("d", True, 0.05),
             ("e", True, float("inf")), ("f", False, -0.3)]
    (lo, lo_row), (hi, hi_row), wrong = share_bounds(items)
    assert (lo, lo_row, hi, hi_row, wrong) == (0.02, "b", 0.03, "c", [])
    assert fit_unreturnable(items) == 0.025
    (lo, _), (hi, _), wrong = share_bounds(items + [("g", False, float("inf")),
                                                    ("h", True, -0.01)])
    assert wrong == ["g", "h"] and (lo, hi) == (0.02, 0.03)  # named, bounding nothing


def test_shipped_share_is_the_fit(items):
    """UNRETURNABLE is what the fit prints: the published out-of-memory placement (Nemotron 3
    Super NVFP4 on 64 B200 at the MXFP8 mapping) bounds it from below at 0.57% since HybridEP
    layers keep no TE row_id_map (-0.17% before; 0.39% before its output layer's dummy wgrad;
    0.91% before the HybridEP handles), DeepSeek-V3 on 2,048 H800 from above at 1.57%; the
    midpoint ships; every outcome row judged right, and it sits under the 9% reserved share
    it is a part of."""
    (lo, lo_row), (hi, hi_row), wrong = share_bounds(items)
    assert wrong == [] and lo < UNRETURNABLE <= hi < FRAGMENTATION[0]
    assert UNRETURNABLE == fit_unreturnable(items)
    assert lo_row.endswith("/mxfp8-mapping") and round(lo, 4) == 0.0057
    assert lo_row.startswith("26.04.01/b200/nemotron-3-super")
    assert hi_row.startswith("deepseek-v3 2,048 H800") and round(hi, 4) == 0.0157
    assert sum(ran for _, ran, _ in items) == 283 + 11  # + the Megatron Core MoE report's
    #   DeepSeek-V3 offload run (ledger.validation.memory_mcore), which bounds nothing


def test_docs_show_the_fit(items):
    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```text\n(.*?)```", page, re.S)
    assert unreturnable_table(items) + "\n" in blocks
