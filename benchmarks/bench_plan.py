"""Planner speed: the full space for Llama 3 405B on 16,384 H100 at seq 8192 and
16M-token batches, against costing the same placements one by one with estimate()."""
import statistics
import time

from ledger.frameworks import get
from ledger.model import llama3_405b
from ledger.plan import Pins, enumerate_grid, plan
from ledger.plan.search import _config
from ledger.step import estimate
from ledger.system import system

RUNS = 5


def main() -> None:
    model, sysm = llama3_405b(), system("h100-sxm")
    plan(model, 16384, sysm, 2048)  # warm the caches (stage tables, makespan forms) once
    walls, result = [], None
    for _ in range(RUNS):
        start = time.perf_counter()
        result = plan(model, 16384, sysm, 2048)
        walls.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    print(f"full search: {result.evaluated:,} placements in {wall:.3f} s (median of {RUNS}) "
          f"= {result.evaluated / wall:,.0f} placements/s")
    g = enumerate_grid(model, 16384, 2048, sysm, Pins(), get("megatron"))
    sample = range(0, len(g["tp"]), max(1, len(g["tp"]) // 300))
    start = time.perf_counter()
    for i in sample:
        estimate(model, _config(g, i, "megatron"), sysm, tp_overlap=bool(g["tpov"][i]))
    one = (time.perf_counter() - start) / len(sample)
    print(f"baseline, one estimate() at a time: {one * 1e3:.2f} ms each = {1 / one:,.0f}/s")
    print(f"ratio grid / one-at-a-time: {result.evaluated / wall * one:,.0f}x")


if __name__ == "__main__":
    main()
