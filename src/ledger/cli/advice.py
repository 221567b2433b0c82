"""What a plan says about the choices the user did not state: the framework whose
pipeline schedules make #1 faster by more than ``BETTER`` (issue 34: DeepSeek-V3 on 256
H100 priced under Megatron-LM's schedules, DualPipe searched only under --framework
deepseek). The only candidate searched is the one whose schedules exist for the model's
kind: DualPipe(V) (deepseek-ai/DualPipe) for a mixture of experts, whose expert
all-to-all it overlaps; a second search costs as much as the first, so no other is run.
"""
from __future__ import annotations

BETTER = 0.10  # a difference worth a line: more than 10% of #1's step time


def other_framework(model, system, gpus: int, global_batch: int, kw: dict, result,
                    framework: str) -> dict | None:
    """{framework, step_time_s, gain, plan} when searching under another framework's
    schedules beats #1 by more than BETTER, else None."""
    from ledger.frameworks import get
    from ledger.plan import plan

    pins = kw.get("pins")
    if not result.plans or not getattr(model, "is_moe", False) or \
            (pins is not None and pins.schedule is not None):
        return None
    mine = set(get(framework).schedules)
    if framework == "deepseek" or {"dualpipe", "dualpipev"} <= mine:
        return None
    from ledger.errors import LedgerError

    try:  # the run's held expert grid may leave that framework no candidate
        other = plan(model, gpus, system, global_batch, **(kw | dict(
            framework="deepseek", top=1, progress=None, baseline=None)))
    except LedgerError:
        return None
    if not other.plans:
        return None
    best, alt = result.plans[0].step_time_s, other.plans[0].step_time_s
    gain = 1 - alt / best
    if gain <= BETTER:
        return None
    return {"framework": "deepseek", "step_time_s": alt, "gain": gain,
            "plan": other.plans[0]}


def line(found: dict | None) -> str:
    """One line for the text output, or ''."""
    if not found:
        return ""
    from ledger.frameworks import get
    from ledger.render.plan import plan_config

    p = found["plan"]
    return (f"\n  --framework {found['framework']} (schedules "
            f"{', '.join(get(found['framework']).schedules)}) steps in "
            f"{found['step_time_s']:.2f} s, {found['gain']:.0%} faster than #1: "
            f"{plan_config(p.config, p.tp_overlap)}")
