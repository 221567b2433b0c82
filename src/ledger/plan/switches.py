"""The planner's overlap switches: which DP (gradient reduction, parameter gather), EP
all-to-all and pipeline-send overlaps a group of the grid runs with - each on where the
framework lets a launch turn it on, unless the user pinned it (``ledger.plan.pins``)."""
from __future__ import annotations

import numpy as np

from ledger.model import ModelSpec
from ledger.plan.rows import present
from ledger.plan.pins import RECOMPUTES, SCHEDULES, Pins


def dp_overlaps(fw, zero: int, pins: Pins) -> tuple:
    """The DP overlap switches at ZeRO stage ``zero``: on where the framework lets a
    launch turn them on, unless pinned (``overlaps``)."""
    fixed = zero in fw.overlap_fixed  # the framework's own, whatever a launch says
    grad = None if fixed else (True if pins.overlap_grad_reduce is None
                               else pins.overlap_grad_reduce)
    param = None if fixed else (zero > 0 and grad if pins.overlap_param_gather is None
                                else pins.overlap_param_gather)
    return fw.overlaps(zero, grad, param)


def overlaps(fw, g, rows, pins: Pins, model: ModelSpec, dispatcher: str | None = None) -> dict:
    """The overlap switches of the grid's ``rows`` (one group: its categorical fields
    shared): each on where the framework lets a launch turn it on (Framework.overlaps,
    Framework.ep_overlap_problem), unless pinned; the EP overlap, an array over the rows,
    only where the framework runs it by default (Framework.ep_overlap) or it is pinned on,
    and none under the allgather ``dispatcher`` the run holds (None: the framework's)."""
    i = rows.start if isinstance(rows, slice) else np.asarray(rows).reshape(-1)[0]
    zeros, sched = g["zero"][rows], SCHEDULES[g["sched"][i]]
    if (zeros == zeros[0]).all():
        grad, param = dp_overlaps(fw, int(zeros[0]), pins)
    else:  # rows of several ZeRO stages (ledger.plan.search._merge_groups): the switches per row
        each = {int(z): dp_overlaps(fw, int(z), pins) for z in present(zeros)}
        grad, param = (np.array([each.get(z, (False, False))[j] for z in range(4)])[zeros]
                       for j in (0, 1))
    where = fw.ep_overlap_schedules
    ep_ok = (model.is_moe and bool(where) and RECOMPUTES[g["rc"][i]] != "full"
             and (dispatcher or fw.moe_dispatcher) != "allgather") \
        & (g["ep"][rows] > 1) & ((g["pp"][rows] == 1) | (sched in where))
    # the framework's default unless pinned (Megatron's --overlap-moe-expert-parallel-comm
    # is off by default; DualPipe overlaps): turned on wherever it may be, the EP overlap's
    # host stall (ledger.step.host.stall_s) made full recompute - which Megatron runs
    # without it - the way a small MoE's plans escaped it
    ep_ok = ep_ok & (fw.ep_overlap if pins.ep_overlap is None else pins.ep_overlap)
    return dict(overlap_grad_reduce=grad, overlap_param_gather=param, ep_overlap=ep_ok,
                overlap_p2p=sched in fw.overlap_p2p_schedules)
