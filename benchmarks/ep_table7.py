"""NVIDIA's measured EP dispatch / combine latencies (Megatron-Core MoE report, arXiv
2603.07685 v2, Table 7) against the ledger's ``ep_time``: every cell, measured and
predicted microseconds and their ratio, by GPU and backend, with the summary the test
(tests/test_ep_table7.py) holds. The unstated settings are set by one rule for every
cell (``ledger.validation.ep_table7``'s docstring).

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/ep_table7.py
"""
from math import exp, log

from ledger.validation.ep_table7 import SOURCE, rows


def main(out=print) -> None:
    out(f"source: {SOURCE}")
    out(f"{'op':<9}{'GPU':<7}{'backend':<10}{'EP':>3}  {'link':<7}{'measured us':>12}"
        f"{'predicted us':>13}{'ratio':>7}")
    cells = rows()
    for op, gpu, backend, ep, link, us, pred in cells:
        out(f"{op:<9}{gpu:<7}{backend:<10}{ep:>3}  {link:<7}{us:>12,}{pred:>13,.0f}"
            f"{pred / us:>7.2f}")
    out("")
    out("by GPU and backend: geometric mean of predicted / measured, and its range")
    groups: dict = {}
    for op, gpu, backend, ep, link, us, pred in cells:
        groups.setdefault((gpu, backend), []).append(pred / us)
    groups[("all", "cells")] = [pred / us for *_, us, pred in cells]
    for (gpu, backend), ratios in groups.items():
        gm = exp(sum(log(r) for r in ratios) / len(ratios))
        within = sum(abs(r - 1) <= 0.25 for r in ratios)
        out(f"  {gpu:<6}{backend:<9} geo-mean {gm:5.2f}  min {min(ratios):5.2f}  "
            f"max {max(ratios):5.2f}  within 25%: {within} of {len(ratios)}")


if __name__ == "__main__":
    main()
