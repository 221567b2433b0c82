"""The planner's grid: every candidate placement as columns of small integers - the
shapes (tp, cp, pp, dp, ep, micro-batch, micro-batches) that divide the cluster and the
batch, and for each the categorical choices the framework runs (schedule and vp, ZeRO,
HSDP shard, SP, CP kind, TP overlap, CPU offload) under every recompute mode.
A run's expert grid and dispatcher held fixed keep only the candidates that pair with
them (``ledger.plan.experts``).
"""
from __future__ import annotations

from itertools import product

import numpy as np

from ledger.model import ModelSpec
from ledger.placement import split_problem
from ledger.plan.experts import Held
from ledger.plan.offloads import choices as offload_choices
from ledger.plan.pins import RECOMPUTES, SCHEDULES, Pins
from ledger.system import System

MICRO_BATCHES = (1, 2, 4, 8)


def _pow2_upto(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if (1 << k) <= n]


def _shapes(model: ModelSpec, gpus: int, batch: int, system: System, pins: Pins,
            held: Held = Held(), fw=None):
    """(tp, cp, pp, dp, ep, mb, m) tuples that divide exactly, their expert grid as
    ``held`` keeps it (module docstring)."""
    seq = model.seq_len
    kind = held.dispatcher or (fw.moe_dispatcher if fw is not None else None)
    deepep = kind == "flex" and (held.backend or "deepep") == "deepep" and model.is_moe
    tps = [t for t in _pow2_upto(min(gpus, 4 * system.gpus_per_node, pins.max_tp or gpus))
           if split_problem(model, t) is None]
    cps = [c for c in _pow2_upto(min(gpus, max(seq // 256, 1)))
           if c == 1 or seq % (2 * c) == 0] if not pins.no_cp else [1]
    for tp, cp in product(tps, cps):
        etp = held.expert_tp(tp)
        if gpus % (tp * cp) or (pins.tp or tp) != tp or (pins.cp or cp) != cp \
                or split_problem(model, tp, cp) is not None or (kind == "flex" and etp > 1):
            continue
        for pp in range(1, min(model.layers, pins.max_pp or gpus) + 1):
            if (gpus // (tp * cp)) % pp or (pins.pp or pp) != pp:
                continue
            dp = gpus // (tp * cp * pp)
            if (pins.dp or dp) != dp:
                continue
            stage = tp * cp * dp  # ETP x EP tiles it (at etp = tp: EP divides dp x cp)
            eps = [e for e in range(1, stage // etp + 1) if stage % (etp * e) == 0
                   and model.num_experts % e == 0 and not (deepep and etp * e == 1)] \
                if model.is_moe else [1]
            for ep, mb in product(eps, MICRO_BATCHES):
                if (pins.ep or ep) != ep or (pins.micro_batch or mb) != mb or batch % (dp * mb):
                    continue
                if pins.ep_overlap and ep == 1:  # the EP overlap pinned on: EP to hide
                    continue
                yield tp, cp, pp, dp, ep, mb, batch // (dp * mb)


def _schedules(model: ModelSpec, pp: int, m: int, pins: Pins, fw=None) -> list[tuple]:
    """(schedule, vp) choices of a pipeline of ``pp`` stages and ``m`` micro-batches."""
    scheds = [("1f1b", 1)]
    if pp > 1:
        slots = model.layers + (fw.split_slack if fw is not None else 0)
        scheds = [("1f1b", 1), ("gpipe", 1), ("zb-h1", 1)]
        scheds += [("interleaved", v) for v in range(2, slots // pp + 1) if m % pp == 0]
        if model.layers >= 2 * pp and m >= 2 * pp - 1:
            scheds.append(("zb-v", 2))
        if m >= 2 * pp:  # DualPipe(V) need m >= 2 pp; DualPipe even pp and m
            scheds += [("dualpipev", 2)] + ([("dualpipe", 2)] if pp % 2 == m % 2 == 0 else [])
    return [(s, v) for s, v in scheds if (pins.schedule or s) == s and (pins.vp or v) == v
            and (fw is None or fw.pipeline_problem(model.layers, pp, v, s) is None)
            and not (pins.ep_overlap and fw is not None and pp > 1
                     and s not in fw.ep_overlap_schedules)]  # the EP overlap pinned on


def _variants(model: ModelSpec, shape, system: System, pins: Pins, fw=None, finetune=None,
              memo=None, rcs=(0,), held: Held = Held()) -> np.ndarray:
    """Categorical choices for one shape: (schedule, vp), zero, hsdp shard, sp, cp kind,
    TP overlap and, for a fine-tune, CPU offload; with a framework ``fw``, only the
    pipelines (Framework.pipeline_problem), ZeRO stages and offloads it runs; each under
    every recompute mode of ``rcs``. Columns (one a row of the result) of (vp, schedule
    code, zero, shard, sp, ulysses, TP overlap, offload code, recompute code), schedules
    outermost, then ZeRO, CP kind, shard, SP, offload, TP overlap and recompute. ``memo``:
    a dict kept over one grid's shapes (schedules read pp and m; the rest tp, cp and
    dp x cp)."""
    tp, cp, pp, dp, ep, mb, m = shape
    memo = {} if memo is None else memo
    key = (tp, cp, dp * cp)
    if key not in memo:
        memo[key] = _inner(model, tp, cp, dp * cp, system, pins, fw, finetune, held)
    inner = memo[key]
    if ("schedules", pp, m) not in memo:
        memo["schedules", pp, m] = np.array(
            [(v, SCHEDULES.index(name)) for name, v in _schedules(model, pp, m, pins, fw)],
            dtype=np.int64).reshape(-1, 2)
    scheds = memo["schedules", pp, m]
    out = np.empty((9, len(scheds), len(inner), len(rcs)), dtype=np.int64)
    out[:2] = scheds.T[:, :, None, None]
    out[2:8] = inner.T[:, None, :, None]
    out[8] = np.asarray(rcs, dtype=np.int64)
    return out.reshape(9, -1)


def _inner(model, tp, cp, replicas, system, pins, fw, finetune,
           held: Held = Held()) -> np.ndarray:
    """(zero, shard, sp, ulysses, TP overlap, offload) choices, the same for every
    schedule; SP as the ``held`` expert TP allows it."""
    zeros = [z for z in range(4) if (pins.zero if pins.zero is not None else z) == z
             and (fw is None or z in fw.zero_stages)]
    kinds = [0]  # ring; 1: Ulysses
    if cp > 1 and split_problem(model, tp, cp, "ulysses") is None:
        kinds.append(1)
    inner = []
    for zero, kind in product(zeros, kinds):
        shards = [replicas]
        if zero == 3 and not pins.no_hsdp:
            shards += [s for s in _pow2_upto(replicas // 2) if s >= system.gpus_per_node
                       and replicas % s == 0]
        offloads = offload_choices(fw, zero, finetune, replicas)
        for shard, sp, off in product(shards, held.sps(tp, fw), offloads):
            for ov in ((False, True) if tp > 1 and sp else (False,)):
                if (pins.tp_overlap if pins.tp_overlap is not None else ov) == ov:
                    inner.append((zero, shard, sp, kind, ov, off))
    return np.array(inner, dtype=np.int64).reshape(-1, 6)


NAMES = ("tp", "cp", "pp", "dp", "ep", "mb", "m", "vp", "sched", "zero", "shard", "sp",
         "ulysses", "tpov", "offload", "rc")


def enumerate_grid(model, gpus, batch, system, pins, fw=None, finetune=None,
                   order=None, held: Held = Held()) -> dict[str, np.ndarray]:
    """Every candidate as columns (sizes as ints, categorical fields as small codes); with a
    framework ``fw``, only what it runs; with ``order`` (the grid -> an integer per row),
    its rows in a stable order of that key; with ``held``, the expert grid and dispatcher
    a run keeps (module docstring)."""
    rcs = np.array([i for i, rc in enumerate(RECOMPUTES) if (pins.recompute or rc) == rc
                    and not ((pins.ep_overlap or pins.no_full_recompute) and rc == "full")])
    # Megatron runs the EP overlap and per-layer CUDA graphs without full recompute
    blocks, seen, memo = [], {}, {}  # (shape, its variants x recompute modes: 9 rows)
    for shape in _shapes(model, gpus, batch, system, pins, held, fw):
        tp, cp, pp, dp, _, _, m = shape  # the variants read neither ep nor mb but through m
        key = (tp, cp, pp, dp, m)
        if key not in seen:
            seen[key] = _variants(model, shape, system, pins, fw, finetune, memo, rcs, held)
        if seen[key].shape[1]:
            blocks.append((shape, seen[key]))
    # each column an array of its own (whole in memory, and under numpy's 4 MiB threshold
    # for huge pages, whose first touch can stall the kernel on compaction)
    sizes = np.array([t.shape[1] for _, t in blocks], dtype=np.int64)
    shapes = np.array([b[0] for b in blocks], dtype=np.int64).reshape(-1, 7)
    grid = {n: np.repeat(shapes[:, i], sizes) for i, n in enumerate(NAMES[:7])}
    grid |= {n: np.concatenate([t[i] for _, t in blocks]) if blocks
             else np.zeros(0, dtype=np.int64) for i, n in enumerate(NAMES[7:])}
    if order is not None:
        key = order(grid)
        if len(key) and 0 <= key.min() and key.max() < 2**15:  # a stable sort of 16-bit
            key = key.astype(np.int16)  # keys is a radix sort
        keep = np.argsort(key, kind="stable")
        grid = {n: col[keep] for n, col in grid.items()}
    return grid
