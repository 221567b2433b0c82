"""The planner: every valid placement of a model on a cluster, costed at once and ranked.

``grid`` enumerates the candidates as columns; ``search`` prices them in numpy with the
same formulas as ``ledger.placement`` and ``ledger.step`` (``grid_memory`` their memory
and their groups, ``dp`` their DP seconds, ``rows`` the grouping by integer codes,
``offloads`` a fine-tune's CPU offload over the grid's arrays, ``experts`` the expert TP
and token dispatcher a run holds in every candidate), each figure once for the candidates
that share what it reads; ``fewest`` the smallest world that fits; ``pins`` holds what a user fixes (pins, a
baseline) and how losing families are picked out.

May import: everything below it (up to ``ledger.step``).
"""
from ledger.plan.pins import SCHEDULES, Pins, parse_baseline
from ledger.plan.fewest import min_gpus
from ledger.plan.search import DEFAULT_HEADROOM_BYTES, enumerate_grid, plan

__all__ = ["DEFAULT_HEADROOM_BYTES", "Pins", "SCHEDULES", "enumerate_grid", "min_gpus",
           "parse_baseline", "plan"]
