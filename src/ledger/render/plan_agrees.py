"""Issue 31's must-hold 3, plan and report agree (benchmarks/plan_agrees.py prints it): a
Megatron-Bridge row (priced as ``ledger.render.bridge`` prices it) run through ``plan``
pinned to its own placement, the run's facts held (``ledger.plan.search`` RUN_FACTS,
HOST_FACTS, EXPERT_FACTS, BUFFER_FACTS) - the planner's best candidate of that shape
against ``estimate``'s step time and ``report``'s required memory. Rows whose settings the
planner does not search (``unsearched``) are counted apart."""
from __future__ import annotations
from ledger.plan import Pins, plan
from ledger.plan.search import BUFFER_FACTS, EXPERT_FACTS, HOST_FACTS, RUN_FACTS
from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
from ledger.step import estimate
from ledger.validation.bridge import rows


def unsearched(c) -> bool:
    """Whether a row's config uses a setting the planner does not search: a pipeline stage
    split, fine-grained offload modules, optimizer offload, capacity padding, recompute of
    some layers, HSDP."""
    return bool(c.stage_layers is not None or c.offload_modules or c.optimizer_offload_fraction
                or c.moe.pad_to_capacity or c.recompute_layers is not None
                or c.recompute_group != 1 or c.hsdp_shard)


def compare(r):
    """(plan's step / estimate's - 1, plan's memory / report's - 1), or None when no
    candidate of the row's shape is ranked."""
    model, prec = model_of(r), precision_of(r)[0]
    c, sysm = config_of(r, prec, model)[0], system_of(r)
    facts = {k: getattr(c, k) for k in RUN_FACTS + HOST_FACTS + EXPERT_FACTS + BUFFER_FACTS}
    pins = Pins(tp=c.tp, pp=c.pp, cp=c.cp, dp=c.dp, ep=c.ep, vp=c.vp, zero=c.zero_stage,
                micro_batch=c.micro_batch, recompute=c.recompute, schedule=c.schedule,
                ep_overlap=c.ep_overlap, overlap_grad_reduce=c.overlap_grad_reduce,
                overlap_param_gather=c.overlap_param_gather)
    res = plan(model, c.world, sysm, c.micro_batch * c.num_microbatches * c.dp, top=50,
               pins=pins, precision=prec, facts=facts, headroom_bytes=0)
    est = estimate(model, c, sysm, precision=prec, tp_overlap=tp_overlap(r))
    same = [p for p in res.plans if p.tp_overlap == (tp_overlap(r) and c.tp > 1)
            and (c.tp == 1 or p.config.sequence_parallel == c.sequence_parallel)
            and p.config.cp_kind == c.cp_kind]
    if not same:
        return None
    return (same[0].step_time_s / est.step_time_s - 1,
            same[0].memory_bytes / est.memory_per_gpu_bytes - 1)


def summary() -> list[str]:
    """One line per Bridge row plan prices apart, then the count."""
    agree, differ, skipped = 0, [], 0
    for r in (x.as_run() for x in rows()):
        model, prec = model_of(r), precision_of(r)[0]
        if unsearched(config_of(r, prec, model)[0]):
            skipped += 1
            continue
        got = compare(r)
        if got is not None and max(abs(x) for x in got) < 1e-9:
            agree += 1
        else:
            differ.append((r.id, got))
    out = [f"  {rid}: " + ("not ranked" if got is None else
                           f"step {got[0]:+.2e}, memory {got[1]:+.2e}") for rid, got in differ]
    return out + [f"plan pinned to each Megatron-Bridge row's placement: {agree} of "
                  f"{agree + len(differ)} equal estimate's step and report's memory to 1e-9; "
                  f"{skipped} rows use settings the planner does not search"]


__all__ = ["compare", "summary", "unsearched"]
