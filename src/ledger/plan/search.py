"""The planner: every valid placement of a model on a cluster, costed at once, ranked.

Candidates are enumerated over tp, cp (ring / Ulysses), pp, vp (up to (layers + 2) / pp)
and schedule - only the pipelines the framework runs (Framework.pipeline_problem) - dp,
ep, ZeRO 0-3 and HSDP shard sizes, sequence parallelism, TP comm-GEMM overlap,
micro-batch size and recompute; num_microbatches follows from the global batch.
A placement fits when its peak memory stays ``headroom`` below the usable capacity. The
grid is priced with numpy through the same formulas one placement uses
(ledger.placement, ledger.step): candidates that share their categorical fields form one
group, their sizes are arrays. Nothing about "TP inside the node" or "PP on the slowest
link" is written here: it must fall out of the costs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import product
from types import SimpleNamespace

import numpy as np

from ledger.arch import model_flops_per_token
from ledger.config import MoESpec, ParallelConfig
from ledger.errors import LedgerError, require_positive
from ledger.frameworks import get as get_framework
from ledger.memory import StateBytes
from ledger.model import ModelSpec
from ledger.pipeline import held_closed
from ledger.placement import (Layout, dp_traffic, layer_activation_bytes, layer_kinds,
                              layer_working_bytes, peak_total, rank_layers, rank_parts,
                              resident_state, shard_state, split_problem, stage_params,
                              tuned_stage_state)
from ledger.plan.pins import (RECOMPUTES, SCHEDULES, Baseline, Pins, matches, parse_baseline,
                              rejections)
from ledger.step import DEFAULT, Calibration, Structure, dp_split, step_times
from ledger.system import System

MICRO_BATCHES = (1, 2, 4, 8)
RUN_FACTS = ("dropout", "loss", "compile")  # run facts the search holds fixed
# Kept free below the usable capacity (HBM minus the reserve): room for what a step's
# peak does not show - allocator fragmentation spikes, NCCL's lazily grown buffers.
DEFAULT_HEADROOM_BYTES = 2 * 2**30


@dataclass
class Plan:
    config: ParallelConfig
    step_time_s: float
    mfu: float
    memory_bytes: float
    headroom_bytes: float
    breakdown: dict[str, float]
    tp_overlap: bool = False

    @property
    def dominant(self) -> str:
        return max(self.breakdown, key=self.breakdown.get)


@dataclass
class PlanResult:
    plans: list[Plan]
    evaluated: int
    fitting: int
    elapsed_s: float
    rejected: list[str] = field(default_factory=list)  # one line per family that lost
    shortfall_bytes: float = 0.0  # when nothing fits: how far the leanest candidate is over
    baseline: "Baseline | None" = None


def _pow2_upto(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if (1 << k) <= n]


def _shapes(model: ModelSpec, gpus: int, batch: int, system: System, pins: Pins):
    """(tp, cp, pp, dp, ep, mb, m) tuples that divide exactly."""
    seq = model.seq_len
    tps = [t for t in _pow2_upto(min(gpus, 4 * system.gpus_per_node, pins.max_tp or gpus))
           if split_problem(model, t) is None]
    cps = [c for c in _pow2_upto(min(gpus, max(seq // 256, 1)))
           if c == 1 or seq % (2 * c) == 0] if not pins.no_cp else [1]
    for tp, cp in product(tps, cps):
        if gpus % (tp * cp) or (pins.tp or tp) != tp or (pins.cp or cp) != cp \
                or split_problem(model, tp, cp) is not None:
            continue
        for pp in range(1, min(model.layers, pins.max_pp or gpus) + 1):
            if (gpus // (tp * cp)) % pp or (pins.pp or pp) != pp:
                continue
            dp = gpus // (tp * cp * pp)
            if (pins.dp or dp) != dp:
                continue
            eps = [e for e in range(1, dp * cp + 1) if (dp * cp) % e == 0
                   and model.num_experts % e == 0] if model.is_moe else [1]
            for ep, mb in product(eps, MICRO_BATCHES):
                if (pins.ep or ep) != ep or (pins.micro_batch or mb) != mb or batch % (dp * mb):
                    continue
                yield tp, cp, pp, dp, ep, mb, batch // (dp * mb)


def _variants(model: ModelSpec, shape, system: System, pins: Pins, fw=None):
    """Categorical choices for one shape: (schedule, vp), zero, hsdp shard, sp, cp kind;
    with a framework ``fw``, only the pipelines (Framework.pipeline_problem) and ZeRO
    stages it runs."""
    tp, cp, pp, dp, ep, mb, m = shape
    scheds = [("1f1b", 1)]
    if pp > 1:
        slots = model.layers + (fw.split_slack if fw is not None else 0)
        scheds = [("1f1b", 1), ("gpipe", 1), ("zb-h1", 1)]
        scheds += [("interleaved", v) for v in range(2, slots // pp + 1) if m % pp == 0]
        if model.layers >= 2 * pp and m >= 2 * pp - 1:
            scheds.append(("zb-v", 2))
    scheds = [(s, v) for s, v in scheds if (pins.schedule or s) == s and (pins.vp or v) == v
              and (fw is None or fw.pipeline_problem(model.layers, pp, v, s) is None)]
    replicas = dp * cp
    zeros = [z for z in range(4) if (pins.zero if pins.zero is not None else z) == z
             and (z == 0 or replicas > 1) and (fw is None or z in fw.zero_stages)]
    kinds = ["ring"]
    if cp > 1 and split_problem(model, tp, cp, "ulysses") is None:
        kinds.append("ulysses")
    for (sched, v), zero, kind in product(scheds, zeros, kinds):
        shards = [replicas]
        if zero == 3 and not pins.no_hsdp:
            shards += [s for s in _pow2_upto(replicas // 2) if s >= system.gpus_per_node
                       and replicas % s == 0]
        for shard, sp in product(shards, (True, False) if tp > 1 else (True,)):
            for ov in ((False, True) if tp > 1 and sp else (False,)):
                if (pins.tp_overlap if pins.tp_overlap is not None else ov) == ov:
                    yield sched, v, zero, shard, sp, kind, ov


NAMES = ("tp", "cp", "pp", "dp", "ep", "mb", "m", "vp", "sched", "zero", "shard", "sp",
         "ulysses", "tpov", "rc")


def enumerate_grid(model, gpus, batch, system, pins, fw=None) -> dict[str, np.ndarray]:
    """Every candidate as columns (sizes as ints, categorical fields as small codes); with a
    framework ``fw``, only what it runs."""
    rcs = np.array([i for i, rc in enumerate(RECOMPUTES) if (pins.recompute or rc) == rc])
    blocks = []
    for shape in _shapes(model, gpus, batch, system, pins):
        variants = [(v, SCHEDULES.index(sched), zero, shard, sp, kind == "ulysses", ov)
                    for sched, v, zero, shard, sp, kind, ov
                    in _variants(model, shape, system, pins, fw)]
        if not variants:
            continue
        block = np.empty((len(variants) * len(rcs), len(NAMES)), dtype=np.int64)
        block[:, :7] = shape
        block[:, 7:14] = np.repeat(np.array(variants, dtype=np.int64), len(rcs), axis=0)
        block[:, 14] = np.tile(rcs, len(variants))
        blocks.append(block)
    grid = np.concatenate(blocks) if blocks else np.zeros((0, len(NAMES)), dtype=np.int64)
    return {n: grid[:, i] for i, n in enumerate(NAMES)}


def _groups(key: np.ndarray):
    """Rows grouped by an integer key: (unique keys, row indices per group)."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    return sorted_key[starts], [order[s:e] for s, e in zip(starts, ends)]


def _codes(g) -> np.ndarray:
    """One integer per categorical combination (schedule, zero, sp, cp kind, TP overlap,
    recompute)."""
    return ((((g["sched"] * 4 + g["zero"]) * 2 + g["sp"]) * 2 + g["ulysses"]) * 2
            + g["tpov"]) * 3 + g["rc"]


@lru_cache(maxsize=4096)
def _kind_counts(model: ModelSpec, pp: int, vp: int, vshape: bool) -> np.ndarray:
    return layer_kinds(model, pp, vp, vshape)[1]


@lru_cache(maxsize=65536)
def _stage_state(model: ModelSpec, tp: int, ep: int, pp: int, vp: int, vshape: bool):
    """Per rank: dense and expert parameters held, and layers held (Megatron layout)."""
    cfg = SimpleNamespace(tp=tp, ep=ep, pp=pp, vp=vp, schedule="zb-v" if vshape else "1f1b")
    dense, expert = np.array(stage_params(model, cfg)).T
    layers = np.array(rank_layers(model.layers, pp, vp, vshape), dtype=float)
    return dense, expert, layers


def _grid_cfg(g, sel, fw, flash=True, precision=None, finetune=None, facts=None, **fixed):
    """The config fields ``ledger.placement.footprint`` and the activation formula read, for the
    rows ``sel`` of the grid: sizes as arrays, categorical fields as given; dropout, loss
    and compile as ``facts`` gives them (``RUN_FACTS``), else the framework's defaults."""
    facts = {k: v for k, v in (facts or {}).items() if v is not None}
    run = dict(dropout=fw.dropout, loss=None, compile=False) | facts
    return SimpleNamespace(
        tp=g["tp"][sel], cp=g["cp"][sel], dp=g["dp"][sel], ep=g["ep"][sel],
        micro_batch=g["mb"][sel], grad_replicas=g["dp"][sel] * g["cp"][sel],
        hsdp_shard=g["shard"][sel], framework=fw.name, flash_attention=flash, act_bytes=2,
        precision=precision, moe=MoESpec(), finetune=finetune, recompute_every=1,
        cp_kind="ring", **run, **fixed)


def _per_kind(model, g, fw, flash, precision, finetune=None, facts=None):
    """Per candidate and kind of layer: the saved bytes of one layer and its backward's
    working set, under the candidate's recompute mode and SP."""
    count = len(g["tp"])
    everything = np.arange(count)
    kinds = layer_kinds(model, 1)[0]  # the model's kinds of layer (LayerKind)
    act, work = np.zeros((count, len(kinds))), np.zeros((count, len(kinds)))
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
    return act, work.max(axis=1) * fw.working_set


def _memory(model, g, fw, per_param, flash=True, precision=None, finetune=None,
            optimizer="adam", facts=None):
    """Peak memory over the pipeline ranks (``ledger.placement.footprint``: the largest
    point of each rank's step, what the device holds there), and the heaviest stage's
    optimizer-step state, for every candidate: the exact Megatron stage layout, ZeRO in
    the framework's dtypes, the schedule's in-flight count in closed form
    (``ledger.pipeline.held``), the recompute mode's activations."""
    count = len(g["tp"])
    mem, state_max = np.empty(count), np.empty(count)
    vshape = (g["sched"] == SCHEDULES.index("zb-v")).astype(np.int64)
    act, work = _per_kind(model, g, fw, flash, precision, finetune, facts)
    radix = [int(g[k].max()) + 1 for k in ("tp", "ep", "pp", "vp")]
    key = ((((g["tp"] * radix[1] + g["ep"]) * radix[2] + g["pp"]) * radix[3] + g["vp"]) * 2
           + vshape) * 4 + g["zero"]
    for sel in _groups(key)[1]:
        i = sel[0]
        tp, ep, pp, vp, zero = (int(g[k][i]) for k in ("tp", "ep", "pp", "vp", "zero"))
        vs = bool(vshape[i])
        dense, expert, layers = _stage_state(model, tp, ep, pp, vp, vs)
        held = _kind_counts(model, pp, vp, vs)  # ranks x kinds
        cfg = _grid_cfg(g, sel, fw, flash, precision, finetune, facts, zero_stage=zero,
                        reshard_after_forward=
                        fw.reshard_after_forward(pp), grad_accumulation=fw.grad_accumulation(pp),
                        sequence_parallel=g["sp"][sel][:, None].astype(bool), pp=pp, vp=vp,
                        schedule="zb-v" if vs else "1f1b", num_microbatches=g["m"][sel][:, None])
        for name in ("hsdp_shard", "grad_replicas", "cp", "micro_batch", "dp"):
            setattr(cfg, name, getattr(cfg, name)[:, None])
        cfg.tp, cfg.ep = tp, ep
        if finetune is None:
            split = [StateBytes(*(b * part[None, :] for b in (
                per_param.params_bytes, per_param.grads_bytes, per_param.optim_bytes)))
                for part in (dense, expert)]
        else:  # the fine-tune's classes, rank by rank (ledger.placement.tuned)
            tuned = tuned_stage_state(model, cfg, fw, optimizer, tp, tp * ep, pp, vp, vs)
            split = [StateBytes(*(np.array([getattr(r[i], f) for r in tuned])[None, :]
                                  for f in ("params_bytes", "grads_bytes", "optim_bytes")))
                     for i in (0, 1)]
        st = shard_state(*split, cfg, fw)
        ranks = np.arange(pp)[None, :]
        parts = rank_parts(model, cfg, fw, ranks, st, act[sel] @ held.T, work[sel][:, None],
                           layers[None, :], per_param)
        parts = replace(parts, cp_forward=parts.cp_forward * (g["ulysses"][sel][:, None] == 0),
                        cp_backward=parts.cp_backward * (g["ulysses"][sel][:, None] == 0))
        point = np.zeros((4, len(sel), pp))
        point[0] = 1.0  # without a pipeline one micro-batch is alive at a time
        if pp > 1:
            scheds = g["sched"][sel]
            for code in np.unique(scheds):
                rows = scheds == code
                point[:, rows] = np.broadcast_to(held_closed(
                    SCHEDULES[code], ranks, pp, cfg.num_microbatches[rows], vp,
                    fw.pipeline_outputs), (4, int(rows.sum()), pp))
        grads_at_loss = fw.grads_persist | (cfg.num_microbatches > 1)
        mem[sel] = peak_total(parts, tuple(point), cfg, fw, grads_at_loss).max(axis=1)
        state = st.params_bytes + st.grads_bytes + st.optim_bytes
        heaviest = state.argmax(axis=1)  # the optimizer step reads and writes its state
        rows = np.arange(len(sel))
        state_max[sel] = (st.params_bytes + st.grads_bytes + 2 * st.optim_bytes)[rows, heaviest]
    return mem, state_max


def _price(model, system, cal, g, precision, optimizer, framework, progress=None,
           flash=True, finetune=None, facts=None):
    """Step time (s) and peak memory (bytes) of every candidate, and its breakdown."""
    count = len(g["tp"])
    step = np.full(count, np.inf)
    parts: dict[str, np.ndarray] = {}
    fw = get_framework(framework, precision)
    st_total = resident_state(model, ParallelConfig(framework=framework, precision=precision),
                              optimizer)
    mem, state_g = _memory(model, g, fw, st_total.scaled(1 / model.params), flash,
                           precision, finetune, optimizer, facts)
    vshape = g["sched"] == SCHEDULES.index("zb-v")
    vr = int(g["vp"].max()) + 1 if count else 1
    lay_key = (g["pp"] * vr + g["vp"]) * 2 + vshape
    keys, lay_inv = np.unique(lay_key, return_inverse=True)
    table = np.array([_stage_state(model, 1, 1, int(k // 2 // vr), int(k // 2 % vr),
                                   bool(k % 2))[2] for k in keys], dtype=object)
    max_layers = np.array([t.max() for t in table])[lay_inv.reshape(-1)]
    last_layers = np.array([t[0] if k % 2 else t[-1] for t, k in zip(table, keys)])[
        lay_inv.reshape(-1)]
    codes = _codes(g)
    if count and np.all(codes[1:] >= codes[:-1]):  # plan() sorts: each group is a slice
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        groups = [slice(a, b) for a, b in zip(starts, np.r_[starts[1:], count])]
    else:
        groups = _groups(codes)[1]
    for done, idx in enumerate(groups, 1):
        if progress:
            progress(done, len(groups))
        sub = {name: col[idx] for name, col in g.items()}
        i0 = idx.start if isinstance(idx, slice) else idx[0]
        cfg = SimpleNamespace(
            tp=sub["tp"], cp=sub["cp"], pp=sub["pp"], dp=sub["dp"], ep=sub["ep"],
            micro_batch=sub["mb"], num_microbatches=sub["m"], vp=sub["vp"],
            schedule=SCHEDULES[g["sched"][i0]], zero_stage=int(g["zero"][i0]),
            sequence_parallel=bool(g["sp"][i0]),
            cp_kind="ulysses" if g["ulysses"][i0] else "ring", recompute=RECOMPUTES[g["rc"][i0]],
            flash_attention=flash, act_bytes=2, framework=framework, precision=precision,
            reshard_after_forward=(sub["pp"] == 1) | (fw.reshard == "always"),
            grad_accumulation=np.where((sub["pp"] > 1) & fw.unsharded_with_pp, "unsharded",
                                       "sharded"),
            hsdp_shard=sub["shard"], grad_replicas=sub["dp"] * sub["cp"], moe=MoESpec(),
            finetune=finetune)
        links = Layout(tp=sub["tp"], cp=sub["cp"], dp=sub["dp"], pp=sub["pp"], ep=sub["ep"],
                       hsdp_shard=sub["shard"], gpus_per_node=system.gpus_per_node)
        layer_s, grad_s, param_s, gather_s = dp_split(dp_traffic(model, st_total, cfg, links),
                                                      cfg, system, model.layers / sub["pp"])
        st = Structure(links={a: links.link(a) for a in ("tp", "cp", "ep", "pp")}
                       | {"layout": links},
                       max_layers=max_layers[idx], last_layers=last_layers[idx],
                       dp_layer_s=layer_s, dp_grad_s=grad_s, dp_param_s=param_s,
                       dp_gather_s=gather_s,
                       state_bytes=state_g[idx])
        t = step_times(model, cfg, system, st, cal, tp_overlap=bool(g["tpov"][i0]))
        step[idx] = t.pop("step_time_s")
        for name, val in t.items():
            if name not in parts:  # not setdefault: that would allocate on every group
                parts[name] = np.zeros(count)
            parts[name][idx] = val
    return step, mem, parts


def _config(g, i, framework: str, flash: bool = True,
            precision: str | None = None, finetune=None, facts=None) -> ParallelConfig:
    flat = g["shard"][i] == g["dp"][i] * g["cp"][i]
    return ParallelConfig(
        tp=int(g["tp"][i]), cp=int(g["cp"][i]), pp=int(g["pp"][i]), dp=int(g["dp"][i]),
        ep=int(g["ep"][i]), zero_stage=int(g["zero"][i]), sequence_parallel=bool(g["sp"][i]),
        cp_kind="ulysses" if g["ulysses"][i] else "ring",
        hsdp_shard=None if flat else int(g["shard"][i]), micro_batch=int(g["mb"][i]),
        num_microbatches=int(g["m"][i]), vp=int(g["vp"][i]),
        schedule=SCHEDULES[g["sched"][i]], recompute=RECOMPUTES[g["rc"][i]],
        framework=framework, flash_attention=flash, precision=precision, finetune=finetune,
        **(facts or {}))


def _plan(g, i, step, mem, parts, limit, flops, gpus, system, conf) -> Plan:
    """Row ``i`` as a Plan; ``conf``: (framework, flash, precision, finetune, facts) for
    its config."""
    mfu = flops / (gpus * system.gpu.bf16_flops * step[i])
    return Plan(_config(g, i, *conf), float(step[i]), float(mfu),
                float(mem[i]), float(limit - mem[i]),
                {k: float(v[i]) for k, v in parts.items() if v[i] > 1e-12},
                tp_overlap=bool(g["tpov"][i]))


def plan(model: ModelSpec, gpus: int, system: System, global_batch: int, top: int = 10,
         pins: Pins = Pins(), cal: Calibration = DEFAULT, precision: str | None = None,
         optimizer: str = "adam", progress=None, framework: str = "megatron",
         flash: bool = True, headroom_bytes: float = DEFAULT_HEADROOM_BYTES,
         baseline: str | None = None, finetune=None, facts: dict | None = None) -> PlanResult:
    """The best placements of ``model`` on ``gpus`` GPUs of ``system``, fastest first
    (ties to the one with more memory to spare); a placement fits when its peak memory
    leaves ``headroom_bytes`` of the usable capacity free. ``baseline`` ("tp=8,pp=16,...")
    prices the best placement of that shape and ranks it among the fitting ones.
    ``finetune`` (a ``ledger.finetune.FineTune``): what trains, priced by
    ``ledger.placement.tuned`` in every candidate; ``facts``: the run's dropout, loss and
    compile (``RUN_FACTS``; None: the framework's)."""
    require_positive("gpus", gpus)
    require_positive("global_batch", global_batch)
    base_pins = parse_baseline(baseline) if baseline is not None else None
    start = time.perf_counter()
    fw = get_framework(framework)
    g = enumerate_grid(model, gpus, global_batch, system, pins, fw)
    keep = np.argsort(_codes(g), kind="stable")  # groups become slices
    g = {k: v[keep] for k, v in g.items()}
    evaluated = len(g["tp"])
    if evaluated == 0:
        raise LedgerError("gpus", f"no placement of {model.name} divides gpus({gpus}) and "
                                  f"global_batch({global_batch}) under the pins given and "
                                  f"{fw.name}'s pipelines ({', '.join(fw.schedules)}"
                                  f"{', equal interleaved chunks' if fw.even_split else ''})")
    cap = system.gpu.hbm_bytes * (1 - cal.memory_reserve)
    if not 0 <= headroom_bytes < cap:
        raise LedgerError("headroom", f"must lie in [0, {cap / 2**30:.2f}) GiB (the usable "
                                      f"capacity), got {headroom_bytes / 2**30:.2f} GiB")
    base_sel = matches(g, base_pins) if base_pins is not None else None
    if base_sel is not None and not base_sel.any():
        raise LedgerError("baseline", f"no placement of {model.name} on {gpus} GPUs with "
                                      f"global_batch({global_batch}) has the shape {baseline!r}")
    step, mem, parts = _price(model, system, cal, g, precision, optimizer, framework, progress,
                              flash, finetune, facts)
    limit = cap - headroom_bytes
    fits = mem <= limit
    elapsed = time.perf_counter() - start
    if not fits.any():
        return PlanResult([], evaluated, 0, elapsed, shortfall_bytes=float(mem.min() - limit))
    order = np.lexsort((-(limit - mem), np.where(fits, step, np.inf)))[: min(top, fits.sum())]
    flops = model_flops_per_token(model) * model.seq_len * global_batch
    conf = (framework, flash, precision, finetune, facts)
    plans = [_plan(g, i, step, mem, parts, limit, flops, gpus, system, conf)
             for i in order]
    rejected = rejections(g, step, mem, fits, parts, cap, order[0], system.gpus_per_node)
    base = None
    if base_sel is not None:
        ok = base_sel & fits
        pool = ok if ok.any() else base_sel
        j = np.flatnonzero(pool)[np.argmin(np.where(ok.any(), step, mem)[pool])]
        rank = int((fits & (step < step[j])).sum()) + 1 if fits[j] else None
        base = Baseline(baseline, _plan(g, j, step, mem, parts, limit, flops, gpus, system, conf),
                        bool(fits[j]), rank, float(step[j] / step[order[0]]))
    return PlanResult(plans, evaluated, int(fits.sum()), time.perf_counter() - start, rejected,
                      baseline=base)

