"""Text and JSON views of the planner's result: the ranked table, the baseline, and
where #1 gains over it. Units are formatted by ``ledger.render``.
"""
from __future__ import annotations

from ledger.render.run import _si
from ledger.render.layout import domain_note, links_note
from ledger.render.text import _seq, config_dict, fmt_bytes, params_dict, params_lines


def split_note(c) -> str:
    """The switches a launch must set to run the placement as priced: the overlaps its
    framework leaves off by default (none where the data-parallel group is one rank: there
    is nothing to overlap), and an EP overlap."""
    from ledger.frameworks import of

    fw, out, reduces = of(c), "", c.dp * c.cp > 1
    if reduces and c.overlap_grad_reduce and c.zero_stage not in fw.overlap_grad_reduce:
        out += " overlap-grad-reduce"
    if reduces and c.overlap_param_gather and c.zero_stage not in fw.overlap_param_gather:
        out += " overlap-param-gather"
    if c.ep_overlap and not fw.ep_overlap:
        out += " ep-overlap"
    return out


def plan_config(c, tp_overlap: bool = False) -> str:
    extra = f" vp={c.vp}" if c.vp > 1 else ""
    extra += f" hsdp={c.hsdp_shard}" if c.hsdp_shard else ""
    extra += " ulysses" if c.cp > 1 and c.cp_kind == "ulysses" else ""
    extra += "" if c.sequence_parallel or c.tp == 1 else " no-sp"
    extra += " tp-overlap" if tp_overlap else ""
    extra += f" etp={c.etp}" if getattr(c, "etp", None) not in (None, c.tp) else ""
    extra += split_note(c)
    return (f"tp={c.tp} cp={c.cp} pp={c.pp} dp={c.dp}" + (f" ep={c.ep}" if c.ep > 1 else "")
            + f" zero={c.zero_stage} mb={c.micro_batch} m={c.num_microbatches} {c.schedule}"
            + extra + (f" recompute={c.recompute}" if c.recompute != "none" else "")
            + (f" offload={c.offload}" if getattr(c, "offload", "none") != "none" else ""))


def held_lines(c) -> list[str]:
    """What the run holds in every placement (``ledger.plan.search.EXPERT_FACTS``): its
    token dispatcher - the flex one's backend and SMs - and expert TP, where given."""
    from ledger.config import dispatcher

    if getattr(c, "moe_dispatcher", None) is None and getattr(c, "etp", None) is None:
        return []
    kind = dispatcher(c)
    words = [f"dispatcher={kind}"]
    if kind == "flex":
        words.append(f"backend={c.ep_backend or 'deepep'}")
        words += [f"sms={c.ep_sms}"] if c.ep_sms else []
    words += [f"etp={c.etp}"] if c.etp is not None else []
    return [f"  held in every placement: {' '.join(words)}"]


def plan_text(model, gpus, system, result, runs=None, priced: int = 0) -> str:
    """The ranked table; with ``runs`` (``ledger.run`` whole runs, one per plan, the best
    of ``priced``) ranked by time to train, with its days, GPU-hours and goodput. Where
    the NVLink domain spans hosts (NVL72), each placement says which axes stay in it."""
    racks = system.gpus_per_domain != system.gpus_per_node
    head = (f"{model.name} ({_seq(model)}) on {gpus} x {system.gpu.name}"
            f"{domain_note(gpus, system)}: "
            f"{result.evaluated:,} placements"
            f"{f' over {result.worlds} worlds' if result.worlds > 1 else ''} costed in "
            f"{result.elapsed_s:.2f} s "
            f"({result.evaluated / max(result.elapsed_s, 1e-9):,.0f}/s), {result.fitting:,} fit")
    if not result.plans and result.host_shortfall_bytes > 0:
        return head + (f"\nnothing fits: those that fit in HBM offload at least "
                       f"{fmt_bytes(result.host_shortfall_bytes)} more per node than its "
                       f"{fmt_bytes(system.host_memory_bytes)} of host memory")
    if not result.plans:
        return head + (f"\nnothing fits: the leanest placement needs "
                       f"{fmt_bytes(result.shortfall_bytes)} more per GPU than the "
                       f"{fmt_bytes(system.gpu.hbm_bytes)} HBM minus the reserve")
    lines = [head, *params_lines(model)[:1], *held_lines(result.plans[0].config)]
    if runs:
        lines.append(f"  ranked by time to train on {_si(runs[0].tokens)} tokens, checkpoints "
                     f"and failures included: the {priced:,} fastest steps as whole runs")
    cost = bool(runs) and runs[0].cost_usd is not None  # a price was given
    extra = (f"  {'days':>8}  {'GPU-hours':>10}  {'goodput':>7}" if runs else "") + \
        (f"  {'cost':>8}" if cost else "")
    lines.append(f"  {'#':>2}  {'step':>8}  {'MFU':>6}  {'memory':>10}{extra}  {'dominant':<12} "
                 f"placement")
    for i, p in enumerate(result.plans, 1):
        run = runs[i - 1] if runs else None
        more = (f"  {run.days:8.2f}  {_si(run.gpu_hours):>10}  {run.goodput:7.1%}"
                if run else "") + (f"  ${_si(run.cost_usd):>7}" if cost else "")
        lines.append(f"  {i:>2}  {p.step_time_s:7.2f}s  {p.mfu:6.1%}  "
                     f"{fmt_bytes(p.memory_bytes, 6)}{more}  {p.dominant:<12} "
                     f"{plan_config(p.config, p.tp_overlap)}"
                     + (links_note(p.config, system) if racks else "") + (
                         f" (host memory {fmt_bytes(p.host_bytes)} of "
                         f"{fmt_bytes(system.host_memory_bytes)} per node)"
                         if p.host_bytes else ""))
    if result.rejected:
        lines.append("  families that lost:")
        lines += [f"    {r}" for r in result.rejected]
    if result.baseline is not None:
        lines += baseline_text(result.plans[0], result.baseline)
    return "\n".join(lines)


def baseline_text(best, base) -> list[str]:
    """The baseline's line and, term by term, where #1 gains over it (seconds)."""
    b = base.plan
    where = f"rank {base.rank:,}" if base.fits else "does not fit"
    out = [f"  baseline {base.spec}: {b.step_time_s:.2f}s  MFU {b.mfu:.1%}  "
           f"{fmt_bytes(b.memory_bytes)}  {where}, {base.vs_best:.3f}x #1's step time",
           f"      as {plan_config(b.config, b.tp_overlap)}",
           "    where #1 gains over the baseline (baseline - #1):"]
    for k in sorted(set(best.breakdown) | set(b.breakdown),
                    key=lambda k: -abs(b.breakdown.get(k, 0.0) - best.breakdown.get(k, 0.0))):
        d = b.breakdown.get(k, 0.0) - best.breakdown.get(k, 0.0)
        if abs(d) >= 5e-4:
            out.append(f"      {k:<12} {d:+8.3f} s")
    out.append(f"      {'memory':<12} {fmt_bytes(b.memory_bytes - best.memory_bytes)} "
               f"per GPU (baseline - #1)")
    return out


def plan_json(model, system, result, runs=None) -> dict:
    from ledger.render.run import run_json

    def one(p, run=None):
        cfg = {k: v for k, v in config_dict(p.config).items() if k != "moe"}
        return cfg | {"tp_overlap": p.tp_overlap,
                      "step_time_s": p.step_time_s, "mfu": p.mfu, "memory_bytes": p.memory_bytes,
                      "headroom_bytes": p.headroom_bytes, "dominant": p.dominant,
                      "breakdown": p.breakdown, "host_bytes": p.host_bytes} | (
                          {"run": run_json(run)} if run else {})
    runs = runs or [None] * len(result.plans)
    return {"model": model.name, **params_dict(model), "seq_len": model.seq_len,
            "gpu": system.gpu.name, "plans": [one(p, r) for p, r in zip(result.plans, runs)],
            "ranked_by": "time_to_train" if any(runs) else "step_time",
            "evaluated": result.evaluated, "fitting": result.fitting,
            "elapsed_s": result.elapsed_s, "rejected": result.rejected,
            "shortfall_bytes": result.shortfall_bytes} | _baseline_json(result, one)


def _baseline_json(result, one) -> dict:
    base = result.baseline
    if base is None:
        return {}
    return {"baseline": {"spec": base.spec, "fits": base.fits,
                         "step_time_s": base.plan.step_time_s, "mfu": base.plan.mfu,
                         "memory_per_gpu_bytes": base.plan.memory_bytes, "rank": base.rank,
                         "vs_best": base.vs_best, "plan": one(base.plan)}}
