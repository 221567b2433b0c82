"""The schedule's points for the planner's grid (``ledger.plan.grid_memory``): what
``ledger.pipeline.held_closed`` and ``grad_sets`` give each PP rank at each distinct
micro-batch count, priced once per (schedule, pp, vp) and shared by the grid's layouts."""
from __future__ import annotations

import numpy as np

from ledger.pipeline import grad_sets, held_closed
from ledger.plan.pins import SCHEDULES
from ledger.plan.rows import present


def schedule_points(g, sel, fw, pp, vp, counts, count_of, memo) -> list:
    """For each schedule among the rows ``sel`` of one stage layout (pp > 1): (its code,
    its rows, each row's index among ``counts``, the grid's distinct micro-batch counts
    (``count_of``: every grid row's), ``ledger.pipeline.held_closed`` at those counts
    for every PP rank: 5 x counts x ranks, and ``ledger.pipeline.grad_sets`` there:
    sets x 4 x counts x ranks) - a closed form of (schedule, rank, count) alone, priced
    once per distinct count and kept in ``memo`` for the grid's other layouts of the
    same depth."""
    out = []
    if pp == 1:
        return out
    scheds, inv = g["sched"][sel], count_of[sel]
    first = scheds[0]
    for code in [first] if (scheds == first).all() else present(scheds):
        rows = scheds == code
        key = (int(code), pp, vp)
        if key not in memo:
            table = np.broadcast_to(held_closed(
                SCHEDULES[code], np.arange(pp)[None, :], pp, counts[:, None], vp,
                fw.pipeline_outputs, grads_kept=fw.pipeline_input_grads), (5, len(counts), pp))
            shape = (len(counts), pp)
            sets = np.array([[np.broadcast_to(x, shape) for x in s] for s in grad_sets(
                SCHEDULES[code], np.arange(pp)[None, :], pp, counts[:, None], vp,
                not fw.grads_persist, inflight=table[0])])
            memo[key] = table, sets
        out.append((code, rows, inv[rows], *memo[key]))
    return out


def own_chunks(model, g, sel, pp: int, vp: int, shape: str, rule: str, act, stage_act):
    """The group's stage activations (rows x ranks, ``act @ alive.T``) with each rank whose
    model chunks differ priced by its own chunks in flight, as one placement prices it
    (``ledger.placement.chunks``), and the factor on its chunks in flight at its loss
    (rows x ranks, 1 elsewhere); ``act``: the group's rows' saved bytes per layer kind."""
    from ledger.pipeline import placement_pipeline
    from ledger.placement.chunks import chunk_acts, rank_points, uneven_ranks
    from ledger.placement.layers import layer_kinds
    from ledger.placement.stages import split_layers

    at_loss = np.ones_like(stage_act)
    if pp == 1:
        return stage_act, at_loss
    kinds = layer_kinds(model, pp, vp, shape, None, rule)[0]
    split = split_layers(model.layers, pp, vp, shape, rule)
    scheds, counts = g["sched"][sel], g["m"][sel]
    for code in present(scheds):
        name = SCHEDULES[code]
        for m in np.unique(counts[scheds == code]):
            uneven = uneven_ranks(model, pp, vp, name, split, int(m), kinds)
            rows = (scheds == code) & (counts == m)
            inflight = placement_pipeline(name, pp, int(m), vp)[1] if uneven else ()
            for r, per_stage in uneven.items():
                every, loss = rank_points(name, pp, int(m), vp, None, r, len(split) - 1)
                stage_act[rows, r], at_loss[rows, r] = chunk_acts(
                    act[rows] @ per_stage.T, every, loss, inflight[r])
    return stage_act, at_loss
