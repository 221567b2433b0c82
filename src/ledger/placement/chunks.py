"""What a pipeline rank's model chunks hold at its peak when they are not alike: each chunk's
own layers, each with the micro-batches of that chunk in flight.

A rank of an interleaved schedule holds several model chunks (virtual stages), and a split
may give them different layers: Megatron's --account-for-embedding-in-pipeline-split /
--account-for-loss-in-pipeline-split take one layer slot from the first / last model
chunk (transformer_block.py ``get_num_layers_to_build`` L147-201 @d98e8a64, the offset
``get_transformer_layer_offset`` alike), --decoder-first/last-pipeline-num-layers or
--pipeline-model-parallel-layout set any count, an uneven rule split (``stages.split_layers``)
or the MTP block on the last chunk add their own. The schedule runs the chunks unevenly:
Megatron's interleaved 1F1B warms up (v-1) g + 2 (p-1-r) forwards walking the chunks in
rounds of g micro-batches (schedules.py L957-965, ``get_schedule_table`` L989-1016), and
its steady steps then run one chunk's forward and another's backward (``get_model_chunk_id``
L1244-1249, L1731-1749) - so the first chunk has more micro-batches in flight than the last.
``layer_kinds`` x the rank's in-flight count weighs every chunk alike (exact when they hold
the same layers); for a rank whose chunks differ, ``rank_points`` walks its own action list
(``ledger.pipeline.schedules.build``, the list the simulator runs) for every point a
forward adds a micro-batch (and every pass of the loss's stage), and ``chunk_acts`` takes
the point where its chunks' saved bytes weigh most: the stage activations per in-flight
micro-batch the footprint multiplies back, and the share of them alive while its loss runs.
Report (``per_gpu``) and planner (``plan.grid_memory``) price it alike. Under Megatron's
block recompute each stage weighs its own first layers recomputed and the rest whole
(``stage_weights``; report only: the planner does not search a partial recompute).

Not here: DualPipe (``layers.inflight_kinds`` weighs its two copies), a schedule past the
simulator's MAX_PASSES (weighed alike, as before), and the step time (the pipeline's
pace is the busiest rank's layers, ``stages.pace``).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ledger.placement.stages import BIDIRECTIONAL, each_layer_kind, rank_stages, stage_starts


def stage_kinds(model, split, kinds) -> np.ndarray:
    """Per model stage, its layers of each of ``kinds`` (``each_layer_kind`` over the split;
    the MTP layers on the last stage, as ``layers.layer_kinds`` counts them)."""
    from ledger.placement.layers import mtp_held

    each, starts = each_layer_kind(model), stage_starts(split)
    out = np.zeros((len(split), len(kinds)))
    for st, n in enumerate(split):
        for key in each[starts[st]:starts[st] + n]:
            out[st, kinds.index(key)] += 1
    for key, n in mtp_held(model).items():
        out[-1, kinds.index(key)] += n
    return out


@lru_cache(maxsize=8)
def _ranks(kind: str, pp: int, m: int, v: int, group):
    from ledger.pipeline.schedules import build

    return build(kind, pp, m, v, group=group).ranks


@lru_cache(maxsize=256)
def rank_points(kind: str, pp: int, m: int, v: int, group, rank: int,
                loss: int) -> tuple[np.ndarray, np.ndarray]:
    """(every point, the points while stage ``loss`` runs) of rank ``rank``'s actions, each
    a row of micro-batches in flight per stage it holds (``rank_stages`` order), distinct
    rows: a forward (or an FB's forward) adds one, a full backward or a weight gradient
    frees one (``schedules.peak_inflight``'s rule); the loss's points are its stage's
    forwards and backwards, before a backward frees.

    >>> every, loss = rank_points("interleaved", 4, 8, 2, None, 3, 7)
    >>> every.max(axis=0).tolist(), loss.tolist()  # 4 warm-up forwards + 1 of stage 3
    ([5.0, 1.0], [[4.0, 1.0]])
    """
    stages = rank_stages(pp, v, kind)[rank]
    col = {s: i for i, s in enumerate(stages)}
    held = [0] * len(stages)
    every, at_loss = set(), set()
    for a in _ranks(kind, pp, m, v, group)[rank]:
        for part in a.parts():
            if part.kind == "F":
                held[col[part.stage]] += 1
                every.add(tuple(held))
            if part.stage == loss and part.kind in ("F", "B", "I"):
                at_loss.add(tuple(held))
            if part.kind in ("B", "W"):
                held[col[part.stage]] -= 1
    as_array = (lambda pts: np.array(sorted(pts), dtype=float).reshape(-1, len(stages)))
    return as_array(every), as_array(at_loss)


def uneven_ranks(model, pp: int, vp: int, schedule, split, m: int, kinds) -> dict:
    """{rank: its stages' kind counts} for the ranks whose model chunks hold different
    layers (module docstring); none without a pipeline, under DualPipe or past MAX_PASSES."""
    from ledger.pipeline.simulator import MAX_PASSES, passes

    if pp == 1 or schedule in BIDIRECTIONAL or passes(schedule, pp, m, vp) > MAX_PASSES:
        return {}
    per_stage = stage_kinds(model, split, kinds)
    out = {}
    for r, stages in enumerate(rank_stages(pp, vp, schedule)):
        rows = per_stage[stages]
        if (rows != rows[0]).any():
            out[r] = rows
    return out


def chunk_acts(weights, every: np.ndarray, loss: np.ndarray, chunks):
    """(stage activations per in-flight micro-batch, the share of the peak's alive at the
    loss) of a rank: ``weights`` its stages' saved bytes per micro-batch (rows x stages, or
    one row), ``every`` / ``loss`` its points (``rank_points``), ``chunks`` its peak
    micro-batches in whole-stage units (``placement_pipeline``)."""
    w = np.atleast_2d(weights)
    peak = (w @ every.T).max(axis=1)
    at_loss = (w @ loss.T).max(axis=1) / np.where(peak > 0, peak, 1) if len(loss) else \
        np.ones(len(w))
    return peak / chunks, at_loss


def stage_weights(model, cfg, split, kinds, per_kind) -> np.ndarray:
    """Per model stage, the saved bytes of one micro-batch through it (one placement):
    its layers at ``per_kind`` (one layer's saved bytes per kind), or under Megatron's
    block recompute each stage's first ``recompute_layers`` at a recomputed layer's bytes
    and the rest (the MTP layers among them) whole (``layers.block_recomputed``)."""
    from ledger.placement.layers import block_recomputed, layer_activation_bytes

    counts = stage_kinds(model, split, kinds)
    again = block_recomputed(model, cfg, split, kinds)
    if again is None:
        return counts @ np.asarray(per_kind, dtype=float)
    kept, whole = (np.array([layer_activation_bytes(model, cfg, k, share=x) for k in kinds])
                   for x in (1.0, 0.0))
    return again @ kept + (counts - again) @ whole


def own_chunks(cfg, weights, rank: int, chunks):
    """(rank ``rank``'s stage activations per in-flight micro-batch, or None where the even
    weighting of ``layer_kinds`` prices it; the factor on its chunks in flight at its loss)
    for one config (``per_gpu``): ``weights`` per model stage (``stage_weights``). Under a
    block recompute always its own: alike chunks sum their weights."""
    from ledger.pipeline.simulator import MAX_PASSES, passes

    block = getattr(cfg, "recompute_layers", None) is not None and cfg.recompute == "full"
    stages = rank_stages(cfg.pp, cfg.vp, cfg.schedule)[rank]
    w = np.asarray(weights)[stages]
    if cfg.schedule in BIDIRECTIONAL or (w == w[0]).all() or cfg.pp == 1 or \
            passes(cfg.schedule, cfg.pp, cfg.num_microbatches, cfg.vp) > MAX_PASSES:
        return (float(w.sum()) if block and cfg.schedule not in BIDIRECTIONAL else None), 1.0
    every, loss = rank_points(cfg.schedule, cfg.pp, cfg.num_microbatches, cfg.vp,
                              getattr(cfg, "vp_group", None), rank, len(weights) - 1)
    acts, at_loss = chunk_acts(w, every, loss, chunks)
    return float(acts[0]), float(at_loss[0])
