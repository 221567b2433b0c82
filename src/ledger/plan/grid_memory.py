"""The planner's grid, priced for memory: every candidate's peak over its pipeline ranks
(``ledger.placement.footprint``: the largest point of each rank's step) with numpy,
through the same stage layout, ZeRO sharding, schedule points (``ledger.pipeline.held``),
activation tables and fine-tune classes one placement uses; and the grouping of the grid
by its categorical fields (ledger.plan.search prices time per group).
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from types import SimpleNamespace

import numpy as np

from ledger.config import MoESpec
from ledger.frameworks import get as get_framework
from ledger.memory import StateBytes
from ledger.model import ModelSpec
from ledger.pipeline.held import loss_stage_ranks
from ledger.placement import (head_ranks, inflight_kinds, layer_activation_bytes,
                              layer_kinds, layer_working_bytes, peak_total, rank_layers,
                              rank_parts, rank_stages, shard_state, split_layers,
                              stage_params, tuned_stage_state, tuned_trainable)
from ledger.frameworks.fp8 import weight_bytes
from ledger.placement.bf16_layers import bf16_kinds, bf16_weights
from ledger.placement.footprint import divisors, expert_divisors
from ledger.placement.buffers import (global_buffer_bytes, grid_double_buffers,
                                      grid_framework_buffers, recv_buffers)
from ledger.placement.graphs import graph_buffers
from ledger.placement.layers import layer_stashed_bytes
from ledger.placement.stash import stash_buffer_bytes, with_stash
from ledger.plan.experts import grid_context
from ledger.plan.grid_points import own_chunks, schedule_points
from ledger.plan.offloads import grid_offload
from ledger.plan.pins import RECOMPUTES, SCHEDULES
from ledger.plan.rows import groups, present


# the schedules whose ranks hold their stages other than in Megatron's loop
SHAPED = tuple(SCHEDULES.index(k) for k in ("zb-v", "dualpipev", "dualpipe"))


def shape_of(code: int) -> str:
    """The schedule that decides which stages a rank holds: loop, V, or DualPipe's."""
    return SCHEDULES[code] if code in SHAPED else "1f1b"


@lru_cache(maxsize=4096)
def _kind_counts(model: ModelSpec, pp: int, vp: int, schedule: str, rule: str) -> np.ndarray:
    return layer_kinds(model, pp, vp, schedule, None, rule)[1]


@lru_cache(maxsize=65536)
def _stage_state(model: ModelSpec, tp: int, ep: int, pp: int, vp: int, schedule: str,
                 framework: str, etp: int | None = None):
    """Per rank: dense and expert parameters held (the experts over ``etp`` x ep; None:
    tp), and layers held (the framework's split; the schedule's stages per rank)."""
    cfg = SimpleNamespace(tp=tp, ep=ep, etp=etp, pp=pp, vp=vp, schedule=schedule,
                          framework=framework)
    dense, expert = np.array(stage_params(model, cfg)).T
    rule = get_framework(framework).split
    layers = np.array(rank_layers(model.layers, pp, vp, schedule, None, rule), dtype=float)
    return dense, expert, layers


def _grid_cfg(g, sel, fw, flash=True, precision=None, finetune=None, facts=None, **fixed):
    """The config fields ``ledger.placement.footprint`` and the activation formula read, for the
    rows ``sel`` of the grid: sizes as arrays, categorical fields as given; dropout, loss
    and compile as ``facts`` gives them (``search.RUN_FACTS``), else the framework's
    defaults."""
    facts = {k: v for k, v in (facts or {}).items() if v is not None}
    run = dict(dropout=fw.dropout, loss=None, compile=False) | facts
    return SimpleNamespace(
        tp=g["tp"][sel], cp=g["cp"][sel], dp=g["dp"][sel], ep=g["ep"][sel],
        micro_batch=g["mb"][sel], grad_replicas=g["dp"][sel] * g["cp"][sel],
        hsdp_shard=g["shard"][sel], framework=fw.name, flash_attention=flash, act_bytes=2,
        precision=precision, moe=MoESpec(), finetune=finetune, recompute_every=1,
        cp_kind="ring", stage_layers=None, **run, **fixed)


# the grid's columns a layer's saved bytes and working set read (_grid_cfg's and the mode's)
LAYER_COLUMNS = ("tp", "cp", "dp", "ep", "mb", "shard", "sp", "rc")


def _per_kind(model, g, fw, flash, precision, finetune=None, facts=None):
    """Per candidate and kind of layer: the saved bytes of one layer and its backward's
    working set, under the candidate's recompute mode and SP; priced once per distinct
    ``LAYER_COLUMNS`` (handed a grid of only those)."""
    reps, of = twins(g, LAYER_COLUMNS)
    act, work, stash = _per_kind_rows(model, {k: g[k][reps] for k in LAYER_COLUMNS}, fw, flash,
                                      precision, finetune, facts)
    return act[of], work[of], stash[of]


def _per_kind_rows(model, g, fw, flash, precision, finetune, facts):
    count = len(g["tp"])
    everything = np.arange(count)
    kinds = layer_kinds(model, 1)[0]  # the model's kinds of layer (LayerKind)
    act, work, stash = (np.zeros((count, len(kinds))) for _ in range(3))
    for rc, name in enumerate(RECOMPUTES):
        for sp in (True, False):
            cfg = _grid_cfg(g, everything, fw, flash, precision, finetune, facts,
                            sequence_parallel=sp, recompute=name)
            pick = (g["rc"] == rc) & (g["sp"] == sp)
            for k, kind in enumerate(kinds):  # a kind's bytes may not vary: a number
                act[pick, k] = np.broadcast_to(layer_activation_bytes(model, cfg, kind),
                                               (count,))[pick]
                work[pick, k] = np.broadcast_to(layer_working_bytes(model, cfg, kind),
                                                (count,))[pick]
                stash[pick, k] = np.broadcast_to(layer_stashed_bytes(model, cfg, kind),
                                                 (count,))[pick]  # placement.stash
    return act, work.max(axis=1) * fw.working_set, stash


def _state(model, cfg, fw, per_param, optimizer, shape, finetune, ranks=slice(None)):
    """The grid group's sharded state per rank (of the PP ranks ``ranks``): the whole
    model's per parameter over each stage's parameters, or a fine-tune's classes
    (``ledger.placement.tuned``)."""
    tp, ep, pp, vp, etp = cfg.tp, cfg.ep, cfg.pp, cfg.vp, getattr(cfg, "etp", None)
    if finetune is None:
        dense, expert, _ = _stage_state(model, tp, ep, pp, vp, shape, fw.name, etp)
        split = [StateBytes(*(b * part[None, ranks] for b in (
            per_param.params_bytes, per_param.grads_bytes, per_param.optim_bytes)))
            for part in (dense, expert)]
    else:  # the classes' bytes per parameter read the ZeRO stage: one stage at a time
        zeros = present(cfg.zero_stage)
        per_zero = _tuned_rows(model, finetune, zeros, fw, optimizer, tp, ep, pp, vp, shape, etp)
        row = np.searchsorted(zeros, np.asarray(cfg.zero_stage).reshape(-1))  # each row's
        split = [StateBytes(*(per_zero[:, :, i, f][:, ranks][row] for f in range(3)))
                 for i in (0, 1)]
    return shard_state(*split, cfg, fw)


def _tuned_rows(model, finetune, zeros, fw, optimizer, tp, ep, pp, vp, shape,
                etp=None) -> np.ndarray:
    """A fine-tune's unsharded state per ZeRO stage of ``zeros``, PP rank, (dense, expert)
    and (params, grads, optimizer) bytes (``ledger.placement.tuned_stage_state``), the
    experts over ``etp`` x ep (None: tp); kept per layout (read-only: the rank classes and
    the state both ask)."""
    key = (model, finetune, tuple(int(z) for z in zeros), fw, optimizer, tp, ep, pp, vp,
           shape, tp if etp is None else etp)
    try:
        return _tuned_kept(*key)
    except TypeError:  # a model or framework with a field that does not hash
        return _tuned_kept.__wrapped__(*key)


@lru_cache(maxsize=256)
def _tuned_kept(model, finetune, zeros, fw, optimizer, tp, ep, pp, vp, shape,
                etp) -> np.ndarray:
    fields = ("params_bytes", "grads_bytes", "optim_bytes")
    return np.array([[[[getattr(part, f) for f in fields] for part in rank]
                      for rank in tuned_stage_state(
                          model, SimpleNamespace(finetune=finetune, zero_stage=int(z)), fw,
                          optimizer, tp, etp * ep, pp, vp, shape)]
                     for z in zeros]).reshape(len(zeros), pp, 2, 3)


# columns of the grid that set a step's time only: memory is priced once for candidates
# that differ in nothing else (the grid handed to the memory model lacks them)
TIME_ONLY = ("tpov",)


def twins(g, cols=None):
    """(the rows that stand for the others - the first of each class of equal rows, in
    order - and for every row the index among them of the one it equals) - rows equal in
    every column of ``cols`` (default: all but ``TIME_ONLY``, None when no column of those
    varies)."""
    if cols is None:
        cols = [k for k in g if k not in TIME_ONLY]
        if all(k not in g or not g[k].any() for k in TIME_ONLY):
            return None
    n = len(g["tp"])
    key, size = np.zeros(n, dtype=np.int64), 1  # each row's class so far, of ``size``
    for k in cols:  # the columns' values numbered densely, a mixed radix of them
        value, values = dense_codes(g[k], int(g[k].max()) + 1 if n else 0)
        key, size = key * values + value, size * values
        if size > n:
            key, size = dense_codes(key, size)
    first = np.full(size, n)
    np.minimum.at(first, key, np.arange(n))  # each class's first row
    reps = np.flatnonzero(np.bincount(first[first < n], minlength=n + 1)[:n])
    where = np.zeros(size, dtype=np.int64)
    where[key[reps]] = np.arange(len(reps))
    return reps, where[key]


def dense_codes(key, size):
    """The integer ``key`` (each below ``size``) renumbered 0, 1, ... in its values' order:
    by a table of ``size`` flags where that is a few times the rows, else by a sort (a
    column of huge values - a global batch of 2^36 sequences - would make the table
    itself the work)."""
    if size > 4 * len(key) + 4096:
        order = np.argsort(key, kind="stable")
        step = np.empty(len(key), dtype=np.int64)
        if len(key):
            step[0] = 0
            np.not_equal(key[order[1:]], key[order[:-1]], out=step[1:])
        number = np.cumsum(step)
        codes = np.empty(len(key), dtype=np.int64)
        codes[order] = number
        return codes, int(number[-1]) + 1 if len(key) else 0
    seen = np.zeros(size, dtype=bool)
    seen[key] = True
    number = np.cumsum(seen) - 1
    return number[key], int(number[-1]) + 1 if size else 0


def _stand_ins(model, g, sel, fw, optimizer, finetune, tp, ep, pp, vp, shape, held,
               points, stage_act, etp=None) -> np.ndarray:
    """The PP ranks whose peaks stand for all of one stage layout's: the first rank of
    each class of ranks equal in every per-rank input of the memory model (stage
    parameters and layers, layers of each kind, the embedding, the output head, a loss
    stage, receive buffers, a fine-tune's state and trainable share; and, to the bit,
    ``stage_act``, one micro-batch's activations of every row) - which then differ
    only in the micro-batches in flight - provided it holds at least as many in flight
    as every rank of its class at every row's count (1F1B and interleaved hold fewer
    down the pipeline, the rest as many). A peak only grows with the micro-batches in
    flight (each of its sums adds activations, ``ledger.placement.footprint``), and
    rounding keeps that order, so the class's largest peak (and heaviest state) is its
    first rank's, to the bit; without that proof, every rank."""
    everyone = np.arange(pp)
    if pp == 1:
        return everyone
    dense, expert, layers = _stage_state(model, tp, ep, pp, vp, shape, fw.name, etp)
    cfg = SimpleNamespace(pp=pp, vp=vp, schedule=shape)
    heads = set(head_ranks(pp, vp, shape))
    columns = [dense, expert, layers, *np.asarray(held, dtype=float).T,
               [0 in h for h in rank_stages(pp, vp, shape)], [r in heads for r in range(pp)],
               [recv_buffers(cfg, fw, r) for r in range(pp)]]
    columns += [[r in loss_stage_ranks(SCHEDULES[code], pp) for r in range(pp)]
                for code, *_ in points]
    if finetune is not None:
        zeros = present(g["zero"][sel])
        rows = _tuned_rows(model, finetune, zeros, fw, optimizer, tp, ep, pp, vp, shape, etp)
        columns += [*rows.transpose(1, 0, 2, 3).reshape(pp, -1).T, tuned_trainable(
            model, finetune, tp, (tp if etp is None else etp) * ep, pp, vp, shape,
            split_layers(model.layers, pp, vp, shape, fw.split))]
    firsts = {}  # each class of ranks (their inputs, as a tuple) -> its first rank
    rep = np.array([firsts.setdefault(tuple(f), r)
                    for r, f in enumerate(np.array(columns, dtype=float).T.tolist())])
    if np.array_equal(stage_act[:, rep], stage_act) \
            and all(np.all(table[0][:, rep] >= table[0]) for *_, table, _ in points) \
            and all(np.all(table[3][:, rep] >= table[3]) for *_, table, _ in points) \
            and all(np.all(sets[:, ::2][..., rep] >= sets[:, ::2]) for *_, sets in points):
        return present(rep)
    return everyone


def _low_weights(model, cfg, fw, held, layout, reps, gpu, st: StateBytes) -> StateBytes:
    """``st`` with a low-precision recipe's weight copies in its params, rank by rank as
    report's ``rank_states`` adds them (``ledger.frameworks.fp8.weight_bytes``: the cached
    copies, or the low params under param gather, sharded as ZeRO shards the params; none
    for the recipe's BF16 layers, ``bf16_kinds``)."""
    if getattr(fw, "fp8", None) is None or cfg.finetune is not None:
        return st
    kinds = layer_kinds(model, *layout[:3], None, layout[4])[0]
    divs = divisors(cfg, fw)[0], expert_divisors(cfg, fw)[0]
    extra = np.stack([np.broadcast_to(np.reshape(weight_bytes(
        model, cfg, fw, held[r], kinds, sum(bf16_kinds(model, fw, r, *layout).values()), gpu,
        divs), -1), (len(cfg.dp),)) for r in reps], axis=1)  # rows x ranks
    return replace(st, params_bytes=st.params_bytes + extra)


def grid_memory(model, g, fw, per_param, flash=True, precision=None, finetune=None,
                optimizer="adam", facts=None, node=8, gpu=None, hosts=(8, None)):
    """Peak memory over the pipeline ranks (``ledger.placement.footprint``: the largest
    point of each rank's step, what the device holds there), and the heaviest stage's
    optimizer-step state, for every candidate: the framework's stage layout, ZeRO in its
    dtypes, the schedule's points in closed form (``ledger.pipeline.held``), the
    recompute mode's activations; with a fine-tune, the state its CPU offload leaves on
    the GPU and (``off``) what the host of a ``node``-GPU node holds, the heaviest GPU's
    state and trainable partition. Candidates that differ only in ``TIME_ONLY`` columns
    are priced once. ``hosts``: GPUs per host and per NVLink domain (None: one host), the
    flex dispatcher's buffers reading the EP ranks one domain holds."""
    pairs = twins(g)
    if pairs is None:
        return _grid_memory(model, {k: v for k, v in g.items() if k not in TIME_ONLY}, fw,
                            per_param, flash, precision, finetune, optimizer, facts, node, gpu,
                            hosts)
    reps, of = pairs
    mem, state_max, off = _grid_memory(
        model, {k: v[reps] for k, v in g.items() if k not in TIME_ONLY}, fw, per_param,
        flash, precision, finetune, optimizer, facts, node, gpu, hosts)
    return mem[of], state_max[of], SimpleNamespace(**{k: v[of] for k, v in vars(off).items()})


def _grid_memory(model, g, fw, per_param, flash, precision, finetune, optimizer, facts, node,
                 gpu=None, hosts=(8, None)):
    count = len(g["tp"])
    mem, state_max = np.empty(count), np.empty(count)
    off = SimpleNamespace(**{k: np.zeros(count) for k in "host params grads optim trained".split()})
    shape = np.select([g["sched"] == c for c in SHAPED], [1 + i for i in range(len(SHAPED))],
                      0).astype(np.int64)
    act, work, stashed = _per_kind(model, g, fw, flash, precision, finetune, facts)
    act16 = None  # the same under BF16, for a recipe's BF16 layers (bf16_layers)
    radix = [int(g[k].max()) + 1 for k in ("tp", "ep", "pp", "vp")]
    # one group per stage layout; the ZeRO stage an array within it
    key = ((((g["tp"] * radix[1] + g["ep"]) * radix[2] + g["pp"]) * radix[3] + g["vp"])
           * (len(SHAPED) + 1) + shape)
    counts, count_of = np.unique(g["m"], return_inverse=True)
    count_of, memo = count_of.reshape(-1), {}
    etp = (facts or {}).get("etp")  # the run's expert TP (None: each row's tp)
    flex = ((facts or {}).get("moe_dispatcher") or fw.moe_dispatcher) == "flex"  # its buffers
    for sel in groups(key)[1]:
        i = sel[0]
        tp, ep, pp, vp = (int(g[k][i]) for k in ("tp", "ep", "pp", "vp"))
        zero = g["zero"][sel][:, None]
        sched = shape_of(int(g["sched"][i]))
        layers = _stage_state(model, tp, ep, pp, vp, sched, fw.name, etp)[2]
        held = _kind_counts(model, pp, vp, sched, fw.split)  # ranks x kinds
        cfg = _grid_cfg(g, sel, fw, flash, precision, finetune, facts, zero_stage=zero,
                        reshard_after_forward=fw.reshard_after_forward(pp),
                        grad_accumulation=fw.grad_accumulation(pp),
                        sequence_parallel=g["sp"][sel][:, None].astype(bool), pp=pp, vp=vp,
                        schedule=sched, num_microbatches=g["m"][sel][:, None])
        for name in ("hsdp_shard", "grad_replicas", "cp", "micro_batch", "dp"):
            setattr(cfg, name, getattr(cfg, name)[:, None])
        cfg.tp, cfg.ep = tp, ep
        points = schedule_points(g, sel, fw, pp, vp, counts, count_of, memo)
        alive = inflight_kinds(model, pp, vp, sched, None, fw.split)[1]  # as in flight
        stage_act, at_loss = own_chunks(model, g, sel, pp, vp, sched, fw.split, act[sel],
                                        act[sel] @ alive.T)  # whole: its last bits vary
        w16 = bf16_weights(model, fw, (pp, vp, sched, None, fw.split),  # the recipe's BF16
                           *layer_kinds(model, pp, vp, sched, None, fw.split), alive)  # layers
        if w16 is not None:
            if act16 is None:
                act16 = _per_kind(model, g, fw, flash, None, finetune, facts)[0]
            stage_act = stage_act + (act16[sel] - act[sel]) @ w16.T
        reps = _stand_ins(model, g, sel, fw, optimizer, finetune, tp, ep, pp, vp, sched,
                          held, points, stage_act, etp)
        st = resident = _low_weights(model, cfg, fw, held, (pp, vp, sched, None, fw.split),
                                     reps, gpu, _state(model, cfg, fw, per_param, optimizer,
                                                       sched, finetune, reps))
        if finetune is not None:  # CPU offload (ledger.plan.offloads)
            trained = np.array(tuned_trainable(
                model, finetune, tp, (tp if etp is None else etp) * ep, pp, vp, sched,
                split_layers(model.layers, pp, vp, sched, fw.split)))[None, reps] \
                / np.where(zero >= 1, cfg.hsdp_shard, 1)
            resident, host, heavy, heavy_trained = grid_offload(g["offload"][sel], st, trained)
            off.host[sel], off.trained[sel] = host * node, heavy_trained
            off.params[sel], off.grads[sel], off.optim[sel] = (
                heavy.params_bytes, heavy.grads_bytes, heavy.optim_bytes)
        kinds, gen = layer_kinds(model, pp, vp, sched, None, fw.split)[0], getattr(
            gpu, "generation", "")  # TE's workspace by the GPU's generation
        kept = {"framework buffers": grid_framework_buffers(model, cfg, (tp, etp, pp, vp, sched),
                                                            kinds, held, reps, fw, gen)[None, :]
            + grid_double_buffers(model, cfg, zero, fw),  # Megatron-FSDP's, on ZeRO-3 rows
            "Megatron global buffer": fw.te_buffers * global_buffer_bytes(model, cfg, np.isin(
                reps, head_ranks(pp, vp, sched))[None, :], np.asarray(held)[reps].sum(axis=1) > 0)}
        graphs = graph_buffers(model, cfg)  # CUDA graphs' static grad outputs (rows x 1)
        if graphs:
            kept["CUDA graphs"] = sum(graphs.values()) * (np.asarray(held)[reps].sum(axis=1) > 0)
        parts = rank_parts(model, cfg, fw, reps[None, :], resident, stage_act[:, reps],
                           work[sel][:, None], layers[None, reps], per_param, kept,
                           grid_context(model, cfg, g, sel, tp, ep, pp, etp, hosts, flex))
        parts = replace(parts, cp_forward=parts.cp_forward * (g["ulysses"][sel][:, None] == 0),
                        cp_backward=parts.cp_backward * (g["ulysses"][sel][:, None] == 0))
        point = np.zeros((5, len(sel), len(reps)))
        point[0] = 1.0  # without a pipeline one micro-batch is alive at a time
        depth = max([len(sets) for *_, sets in points], default=1)
        lazy = np.ones((depth, 4, len(sel), len(reps)))  # ledger.pipeline.grad_sets
        for _, rows, inv, table, sets in points:
            point[:, rows] = table[:, :, reps][:, inv]
            deep = sets[np.minimum(np.arange(depth), len(sets) - 1)]  # the last repeated
            lazy[:, :, rows] = deep[:, :, :, reps][:, :, inv]
        parts = with_stash(parts, stash_buffer_bytes(cfg, (stashed[sel] @ alive.T)[:, reps],
                                                     point[0]))  # the MoE paged stash's
        grads_at_loss = fw.grads_persist | (cfg.num_microbatches > 1)
        lazy[:, 2] *= at_loss[:, reps]  # a rank's own chunks at its loss (placement.chunks)
        mem[sel] = peak_total(parts, tuple(point), cfg, fw, grads_at_loss, None if depth == 1
                              and (at_loss == 1).all() else [tuple(s) for s in lazy]).max(axis=1)
        state = st.params_bytes + st.grads_bytes + st.optim_bytes
        heaviest = state.argmax(axis=1)  # the optimizer step reads and writes its state
        rows = np.arange(len(sel))
        # the optimizer step reads and writes its state (the host's, offloaded)
        state_max[sel] = (st.params_bytes + st.grads_bytes + 2 * st.optim_bytes)[
            rows, heaviest] * (g["offload"][sel] == 0)
    return mem, state_max, off
