"""The planner: every valid placement of a model on a cluster, costed at once, ranked.

Candidates are enumerated over tp, cp (ring / Ulysses), pp, vp (up to (layers + 2) / pp)
and schedule - only the pipelines the framework runs (Framework.pipeline_problem), DualPipe
and DualPipeV included, each split by the framework's rule (Framework.split: the uneven
splits a Megatron layout builds) - dp, ep, ZeRO 0-3 and HSDP shard sizes, sequence
parallelism, TP comm-GEMM overlap, micro-batch size and recompute; num_microbatches
follows from the global batch. Each overlap switch the framework offers (DP gradient
reduction and parameter gather, EP all-to-alls) is set on, since it never slows a step in
this model, unless pinned off. A run's expert TP, token dispatcher and the flex
dispatcher's backend and SMs are held fixed (``EXPERT_FACTS``, ``HOST_FACTS``) and priced
in every candidate as one placement prices them, in time and in memory; the grid keeps the
candidates they pair with (``ledger.plan.grid``). A placement fits when its peak memory
stays ``headroom`` below the usable capacity. The grid is priced with numpy through the
same formulas one placement uses (ledger.placement, ledger.step): candidates that share
their categorical fields form one group, their sizes are arrays. Nothing about "TP inside
the node" or "PP on the slowest link" is written here: it must fall out of the costs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ledger.arch import finetune_flops_per_token
from ledger.config import OFFLOADS, MoESpec, ParallelConfig
from ledger.errors import LedgerError, require_positive
from ledger.frameworks import get as get_framework
from ledger.frameworks.dsa_loss import check_held_loss
from ledger.frameworks.dtypes import with_dtypes
from ledger.memory import StateBytes
from ledger.model import ModelSpec
from ledger.placement import Layout, pace, resident_state
from ledger.placement.nccl_buffers import nvls_on, nvls_total
from ledger.plan.dp import dp_seconds
from ledger.plan.experts import held_experts, held_words
from ledger.plan.grid import enumerate_grid
from ledger.plan.grid_memory import dense_codes, grid_memory, shape_of
from ledger.plan.offloads import step_s as offload_step_s
from ledger.plan.pins import (RECOMPUTES, SCHEDULES, Baseline, Pins, matches, parse_baseline,
                              rejections)
from ledger.plan.rows import codes, groups
from ledger.plan.switches import overlaps as _overlaps
from ledger.step import DEFAULT, Calibration, Structure, layout_links, step_times
from ledger.step.dp import nccl_system
from ledger.system import System

DTYPE_FACTS = ("grad_dtype", "master_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")
RUN_FACTS = ("dropout", "loss", "compile", "recompute_modules", "indexer_loss",  # held (and
             "paged_stash", "offload_activation_layers") + DTYPE_FACTS  # Megatron's CPU offload)
# schedules whose makespan ledger.pipeline.makespan evaluates as a matrix product
MATRIX_FORMS = ("zb-h1", "zb-v", "interleaved-zb")
HOST_FACTS = ("cuda_graph", "cuda_graph_local",  # what the host launches (ledger.step.host;
              "ep_backend",  # whose graphs: what a router graph keeps, placement.layers),
              "ep_sms",  # the SMs the flex dispatcher takes from compute (step.ep_sms),
              "shared_expert_overlap", "delay_wgrad",  # what hides EP (step.layer_comms),
              "fp8_attention",  # the attention core's rate (step.layer_time.attention_peak)
              "fp8_output_proj",  # the LM head's rate (step.gemm.head_peak)
              "fused_grouped_mlp", "hybridep_permute_fusion",  # eager passes (step.eager)
              "dglu_dbias_regression")  # and a table's declared dGLU-dbias slowdown there
# the expert grid and dispatcher a run keeps: expert TP (None: each candidate's tp) and the
# token dispatcher (None: the framework's); ep_backend and ep_sms ride with HOST_FACTS
EXPERT_FACTS = ("etp", "moe_dispatcher")
BUFFER_FACTS = ("dp_bucket_params", "expandable_segments", "grad_accumulation_fusion",  # its
                "fsdp_double_buffer", "nccl_nvls", "cublas_workspace_bytes", "te_layers")  # buffers
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
    host_bytes: float = 0.0  # CPU offload: the host memory it needs per node (0: none)

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
    worlds: int = 1  # worlds searched (--min-gpus: evaluated and elapsed_s are all of them)
    host_shortfall_bytes: float = 0.0  # or, fitting in HBM, the leanest over the host's RAM
    baseline: "Baseline | None" = None


def _nvls_grid(g, system, facts):
    """NCCL's NVLS buffers of each placement of the grid (``placement.nccl_buffers``)."""
    gen = system.gpu.generation
    if not len(g["tp"]) or not nvls_on((facts or {}).get("nccl_nvls"), system.nvls, gen):
        return 0.0
    lay = Layout(tp=g["tp"], cp=g["cp"], dp=g["dp"], pp=g["pp"], ep=g["ep"],
                 etp=(facts or {}).get("etp"),
                 gpus_per_node=system.gpus_per_node, gpus_per_domain=system.gpus_per_domain)
    return nvls_total(lay, g["ep"], gen)


def _price(model, system, cal, g, precision, optimizer, framework, progress=None,
           flash=True, finetune=None, facts=None, pins: Pins = Pins(), timed=None):
    """Step time (s) and peak memory (bytes) of every candidate, and its breakdown; ``timed(mem,
    host)``: which candidates' time to price (the rest an infinite step, no breakdown)."""
    system = nccl_system(system, (facts or {}).get("nccl_nvls"))  # timing as memory prices it
    count = len(g["tp"])
    step = np.full(count, np.inf)
    parts: dict[str, np.ndarray] = {}
    dtypes = {k: v for k, v in (facts or {}).items() if k in DTYPE_FACTS and v is not None}
    fw = with_dtypes(get_framework(framework, precision), *(dtypes.get(k) for k in DTYPE_FACTS),
                     precision=precision)
    st_total = resident_state(model, ParallelConfig(framework=framework, precision=precision,
                                                    **dtypes), optimizer)
    node = min(system.gpus_per_node, int(g["tp"][0] * g["cp"][0] * g["pp"][0] * g["dp"][0])) \
        if count else 1
    mem, state_g, off = grid_memory(model, g, fw, st_total.scaled(1 / model.params), flash,
                                    precision, finetune, optimizer, facts, node, system.gpu,
                                    (system.gpus_per_node, system.gpus_per_domain))
    mem = mem + _nvls_grid(g, system, facts)  # NCCL's NVLS buffers, as report prices them
    vr, sr = (int(g["vp"].max()) + 1 if count else 1), len(SCHEDULES)
    lay_key = (g["pp"] * vr + g["vp"]) * sr + g["sched"]
    keys = np.flatnonzero(np.bincount(lay_key)) if count else lay_key  # each layout
    lay_inv = dense_codes(lay_key, int(lay_key.max()) + 1 if count else 0)[0]  # each row's
    mtp = model.mtp_layers * len(model.mtp_kinds)  # the MTP depths' layers
    paces = np.array([pace(model.layers, mtp, int(k // sr // vr),
                           int(k // sr % vr), shape_of(int(k % sr)), fw.split)
                      for k in keys]).reshape(-1, 3)
    code = codes(g)
    if count and np.all(code[1:] >= code[:-1]):  # plan() sorts: each group is a slice
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        parts_of = [slice(a, b) for a, b in zip(starts, np.r_[starts[1:], count])]
    else:
        parts_of = groups(code)[1]
    need = None
    if timed is not None:  # only the rows wanted, but whole groups of the schedules whose
        # makespan is a matrix product (exact to the last bit only for one shape of it)
        wanted = timed(mem, off.host)
        rows = np.arange(count)
        parts_of = [idx if SCHEDULES[g["sched"][rows[idx][0]]] in MATRIX_FORMS
                    else rows[idx][wanted[idx]] for idx in parts_of if wanted[idx].any()]
        need = np.zeros(count, dtype=bool)
        for idx in parts_of:
            need[idx] = True
    parts_of = _merge_groups(g, parts_of)
    dp_of = dp_seconds(model, system, g, fw, st_total, framework, precision, finetune,
                        pins, need, (facts or {}).get("dp_bucket_params"),
                        (facts or {}).get("etp"), dtypes)
    for done, idx in enumerate(parts_of, 1):
        if progress:
            progress(done, len(parts_of))
        i0 = idx.start if isinstance(idx, slice) else idx[0]
        cfg, links = _group(g, idx, fw, framework, precision, flash, finetune, pins, model,
                            system, facts)
        layer_s, grad_s, param_s, gather_s = dp_of(idx)
        busiest, head, share = paces[lay_inv[idx]].T
        heavy = StateBytes(off.params[idx], off.grads[idx], off.optim[idx])
        wait, hidden, cpu = offload_step_s(cfg, int(g["offload"][i0]), heavy, off.trained[idx],
                                           node, system)
        st = Structure(links=layout_links(links),
                       max_layers=busiest, head_layers=head, head_share=share,
                       dp_layer_s=layer_s, dp_grad_s=grad_s, dp_param_s=param_s,
                       dp_gather_s=gather_s,
                       state_bytes=state_g[idx], offload_s=wait, offload_hidden_s=hidden,
                       cpu_step_s=cpu)
        tpov = g["tpov"][idx]
        t = step_times(model, cfg, system, st, cal, tp_overlap=bool(tpov[0])
                       if (tpov == tpov[0]).all() else tpov.astype(bool))
        step[idx] = t.pop("step_time_s")
        t.pop("exposed")
        for name, val in t.items():
            if name not in parts:  # not setdefault: that would allocate on every group
                parts[name] = np.zeros(count)
            parts[name][idx] = val
    return step, mem, parts, off.host


def _group(g, idx, fw, framework, precision, flash, finetune, pins, model, system,
           facts=None):
    """The config namespace (sizes as arrays, categorical fields those of the group's
    first row, the host's ``facts``) and the rank Layout of the grid's rows ``idx``."""
    sub = {name: col[idx] for name, col in g.items()}
    i0 = idx.start if isinstance(idx, slice) else idx[0]
    held = {k: v for k, v in (facts or {}).items()  # the loss and compile: the loss's
            if k in HOST_FACTS + EXPERT_FACTS + DTYPE_FACTS + ("loss", "compile",  # traffic
                                                              "indexer_loss")  # (step.timing;
            and v is not None}  # the indexer's, step.indexer_loss); the dtypes: frameworks.of
    cfg = SimpleNamespace(
        tp=sub["tp"], cp=sub["cp"], pp=sub["pp"], dp=sub["dp"], ep=sub["ep"],
        micro_batch=sub["mb"], num_microbatches=sub["m"], vp=sub["vp"],
        schedule=SCHEDULES[g["sched"][i0]],
        zero_stage=int(g["zero"][i0]) if (sub["zero"] == g["zero"][i0]).all() else sub["zero"],
        sequence_parallel=bool(g["sp"][i0]),
        cp_kind="ulysses" if g["ulysses"][i0] else "ring", recompute=RECOMPUTES[g["rc"][i0]],
        flash_attention=flash, act_bytes=2, framework=framework, precision=precision,
        reshard_after_forward=(sub["pp"] == 1) | (fw.reshard == "always"),
        grad_accumulation=np.where((sub["pp"] > 1) & fw.unsharded_with_pp, "unsharded",
                                   "sharded"),
        hsdp_shard=sub["shard"], grad_replicas=sub["dp"] * sub["cp"], moe=MoESpec(),
        finetune=finetune, stage_layers=None,
        **_overlaps(fw, g, idx, pins, model, held.get("moe_dispatcher")),
        # the run's modules under selective, as the grid's memory prices them (_config)
        recompute_modules=(facts or {}).get("recompute_modules")
        if RECOMPUTES[g["rc"][i0]] == "selective" else None,
        **held)
    links = Layout(tp=sub["tp"], cp=sub["cp"], dp=sub["dp"], pp=sub["pp"], ep=sub["ep"],
                   etp=held.get("etp"),
                   hsdp_shard=sub["shard"], gpus_per_node=system.gpus_per_node,
                   gpus_per_domain=system.gpus_per_domain)
    return cfg, links


def _merge_groups(g, parts: list) -> list:
    """The groups of rows to price together: those that differ only in their ZeRO stage
    and TP comm-GEMM overlap made one (its rows in order, where the first of them stood)
    - the stage reaches a step's time only through the DP seconds and overlap switches,
    the TP overlap through the TP seconds, arrays over the rows - but under CPU offload
    (its seconds read the stage) and in the schedules whose makespan is a matrix product
    (its last bits read the group's shape)."""
    out, at = [], {}
    for idx in parts:
        i0 = idx.start if isinstance(idx, slice) else idx[0]
        if SCHEDULES[g["sched"][i0]] in MATRIX_FORMS or g["offload"][i0]:
            out.append([idx])
            continue
        key = tuple(int(g[k][i0]) for k in ("sched", "sp", "ulysses", "rc"))
        if key in at:
            out[at[key]].append(idx)
        else:
            at[key] = len(out)
            out.append([idx])
    rows = np.arange(len(g["tp"]))
    return [np.sort(np.concatenate([rows[i] for i in p])) if len(p) > 1 else p[0]
            for p in out]


def _config(g, i, framework: str, flash: bool = True, precision: str | None = None,
            finetune=None, pins: Pins = Pins(), model: ModelSpec | None = None,
            facts=None) -> ParallelConfig:
    flat = g["shard"][i] == g["dp"][i] * g["cp"][i]
    switches = _overlaps(get_framework(framework), g, [i], pins, model,
                         (facts or {}).get("moe_dispatcher")) if model is not None else {}
    if switches:
        switches["ep_overlap"] = bool(switches["ep_overlap"][0])
    facts = dict(facts or {})
    # Megatron runs the shared experts' overlap without the combined 1F1B and delays the
    # wgrad only within it (frameworks.host_checks.moe_overlap_problems); the rows were
    # priced so (step.layer_comms), and each row's config carries the one that ran
    drop = "shared_expert_overlap" if switches.get("ep_overlap") else "delay_wgrad"
    if facts.get(drop):
        facts[drop] = False
    if RECOMPUTES[g["rc"][i]] != "selective":  # the modules of a selective recompute
        facts.pop("recompute_modules", None)
    return ParallelConfig(
        tp=int(g["tp"][i]), cp=int(g["cp"][i]), pp=int(g["pp"][i]), dp=int(g["dp"][i]),
        ep=int(g["ep"][i]), zero_stage=int(g["zero"][i]), sequence_parallel=bool(g["sp"][i]),
        cp_kind="ulysses" if g["ulysses"][i] else "ring",
        hsdp_shard=None if flat else int(g["shard"][i]), micro_batch=int(g["mb"][i]),
        num_microbatches=int(g["m"][i]), vp=int(g["vp"][i]),
        schedule=SCHEDULES[g["sched"][i]], recompute=RECOMPUTES[g["rc"][i]],
        framework=framework, flash_attention=flash, precision=precision, finetune=finetune,
        offload=OFFLOADS[g["offload"][i]], **facts, **switches)


def _first(step, mem, fits, limit, n: int) -> np.ndarray:
    """The ``n`` fastest fitting rows, ties to more memory to spare, then to the earlier
    row: ``np.lexsort((-(limit - mem), np.where(fits, step, inf)))[:n]``, sorting only
    the rows no slower than the n-th fastest."""
    key = np.where(fits, step, np.inf)
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    nth = np.partition(key, n - 1)[n - 1] if n < len(key) else np.nan
    near = np.flatnonzero(key <= nth) if not np.isnan(nth) else np.arange(len(key))  # ties
    # kept whole
    return near[np.lexsort((-(limit - mem[near]), key[near]))][:n]


def _plan(g, i, step, mem, parts, limit, flops, gpus, system, conf, host=None) -> Plan:
    """Row ``i`` as a Plan; ``conf``: (framework, flash, precision, finetune, pins, model,
    facts) for its config."""
    mfu = flops / (gpus * system.gpu.bf16_flops * step[i])
    return Plan(_config(g, i, *conf), float(step[i]), float(mfu),
                float(mem[i]), float(limit - mem[i]),
                {k: float(v[i]) for k, v in parts.items() if v[i] > 1e-12},
                tp_overlap=bool(g["tpov"][i]),
                host_bytes=float(host[i]) if host is not None and g["offload"][i] else 0.0)


def graph_pins(pins: Pins, scopes) -> Pins:
    """The pins under held CUDA-graph ``scopes``: per-layer graphs (any but full_iteration)
    run without full recompute (Megatron-LM transformer_config.py L2854-2858 @d98e8a64), so
    the search leaves it out (a pin against it is refused: ledger.cli.graph_flags)."""
    from dataclasses import replace

    if not scopes or "full_iteration" in scopes:
        return pins
    return replace(pins, no_full_recompute=True)


def offload_pins(pins: Pins, layers: int) -> Pins:
    """The pins under a held CPU activation offload of ``layers`` layers (Megatron's
    --cpu-offloading-num-layers, priced as ``ledger.placement.layers`` prices it: those
    layers' activations on the host, their copies on a side stream): Megatron runs it
    without pipeline parallelism or recompute (transformer_config.py L1884-1899 @d98e8a64),
    so the search holds pp 1 and recompute none; a pin against that is refused."""
    from dataclasses import replace

    if not layers:
        return pins
    if pins.pp not in (None, 1) or pins.recompute not in (None, "none"):
        raise LedgerError("offload_activation_layers", f"Megatron offloads the activations of "
                          f"{layers} layers without pipeline parallelism or recompute "
                          f"(transformer_config.py L1884-1899 @d98e8a64), got pp({pins.pp}) "
                          f"recompute {pins.recompute!r}")
    return replace(pins, pp=1, recompute="none")


def plan(model: ModelSpec, gpus: int, system: System, global_batch: int, top: int = 10,
         pins: Pins = Pins(), cal: Calibration = DEFAULT, precision: str | None = None,
         optimizer: str = "adam", progress=None, framework: str = "megatron",
         flash: bool = True, headroom_bytes: float = DEFAULT_HEADROOM_BYTES,
         baseline: str | None = None, finetune=None, facts: dict | None = None) -> PlanResult:
    """The best placements of ``model`` on ``gpus`` GPUs of ``system``, fastest first (ties
    to the one with more memory to spare); a placement fits when its peak memory leaves
    ``headroom_bytes`` of the usable capacity free. ``baseline`` ("tp=8,pp=16,...") prices
    the best placement of that shape and ranks it among the fitting ones. ``finetune`` (a
    ``ledger.finetune.FineTune``): what trains, priced by ``ledger.placement.tuned`` in every
    candidate; ``facts``: the run's dropout, loss (an indexer loss off Megatron refused as a
    config refuses it) and compile (``RUN_FACTS``; None: the framework's), what its host
    runs (``HOST_FACTS``), its expert TP and dispatcher (``EXPERT_FACTS``: held_experts)."""
    require_positive("gpus", gpus)
    require_positive("global_batch", global_batch)
    base_pins = parse_baseline(baseline) if baseline is not None else None
    start = time.perf_counter()
    fw = get_framework(framework)
    check_held_loss((facts or {}).get("indexer_loss"), fw, framework)
    held = held_experts(model, facts)
    pins = offload_pins(pins, (facts or {}).get("offload_activation_layers") or 0)
    pins = graph_pins(pins, (facts or {}).get("cuda_graph") or ())
    g = enumerate_grid(model, gpus, global_batch, system, pins, fw, finetune,
                       order=codes, held=held)  # each group a slice
    evaluated = len(g["tp"])
    if evaluated == 0:
        raise LedgerError("gpus", f"no placement of {model.name} divides gpus({gpus}) and "
                                  f"global_batch({global_batch}) under the pins given"
                                  f"{held_words(held)} and "
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
    limit = cap - headroom_bytes

    def timed(mem, host):  # the time of what fits, and of the baseline's shape
        fit = (mem <= limit) & (host <= system.host_memory_bytes)
        return fit if base_sel is None else fit | base_sel
    step, mem, parts, host = _price(model, system, cal, g, precision, optimizer, framework,
                                    progress, flash, finetune, facts, pins, timed)
    fits = (mem <= limit) & (host <= system.host_memory_bytes)  # CPU offload: the node's RAM
    elapsed = time.perf_counter() - start
    if not fits.any():
        in_hbm = mem <= limit  # fits in HBM, not in its node's host memory
        return PlanResult([], evaluated, 0, elapsed, shortfall_bytes=float(mem.min() - limit),
                          host_shortfall_bytes=float(host[in_hbm].min()
                                                     - system.host_memory_bytes)
                          if in_hbm.any() else 0.0)
    order = _first(step, mem, fits, limit, min(top, int(fits.sum())))
    flops = finetune_flops_per_token(model, finetune) * model.seq_len * global_batch
    conf = (framework, flash, precision, finetune, pins, model, facts)
    plans = [_plan(g, i, step, mem, parts, limit, flops, gpus, system, conf, host)
             for i in order]
    rejected = rejections(g, step, mem, fits, parts, cap, order[0], system.gpus_per_node)
    base = None
    if base_sel is not None:
        ok = base_sel & fits
        pool = ok if ok.any() else base_sel
        j = np.flatnonzero(pool)[np.argmin(np.where(ok.any(), step, mem)[pool])]
        rank = int((fits & (step < step[j])).sum()) + 1 if fits[j] else None
        base = Baseline(baseline, _plan(g, j, step, mem, parts, limit, flops, gpus, system, conf,
                                        host),
                        bool(fits[j]), rank, float(step[j] / step[order[0]]))
    return PlanResult(plans, evaluated, int(fits.sum()), time.perf_counter() - start, rejected,
                      baseline=base)

