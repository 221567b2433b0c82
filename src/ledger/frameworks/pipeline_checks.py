"""Megatron-Core's pipeline-only settings (``ParallelConfig.wgrad_deferral``, ``vp_group``):
where Megatron runs them, one check each for the CLI's config and the Megatron launch
reader (``ledger.io.megatron.model.refusals``)."""
from __future__ import annotations

from ledger.errors import LedgerError


def deferral_problem(pp: int, fusion: bool, limit: int) -> str | None:
    """Why Megatron refuses --defer-embedding-wgrad-compute here, or None: it needs pipeline
    parallelism, gradient-accumulation fusion and a limit >= 0
    (model_parallel_config.py L545-558 @d98e8a64, ValueError each).

    >>> deferral_problem(1, True, 0)
    'needs PP > 1, gradient-accumulation fusion and a limit >= 0 (model_parallel_config.py L545-558 @d98e8a64), got pp(1) fusion on limit 0'
    >>> deferral_problem(2, True, 3) is None
    True
    """
    if pp > 1 and fusion and limit >= 0:
        return None
    return (f"needs PP > 1, gradient-accumulation fusion and a limit >= 0 "
            f"(model_parallel_config.py L545-558 @d98e8a64), got pp({pp}) "
            f"fusion {'on' if fusion else 'off'} limit {limit}")


def _megatron_only(cfg, fw, field: str, typed: str, megatron_flag: str) -> None:
    """A setting only Megatron has, refused in one line under any other framework."""
    if fw.family != "megatron":
        raise LedgerError(field, f"{typed} is Megatron's {megatron_flag}; framework "
                                 f"{cfg.framework} has no such setting")


def check_pipeline_settings(cfg, fw) -> None:
    """--wgrad-deferral and --vp-group: Megatron's own settings (torchtitan and DeepSpeed
    have neither; PyTorch's ScheduleInterleaved1F1B fixes its rounds at
    m // max(1, m // pp) micro-batches, torch/distributed/pipelining/schedules.py
    L2935-2937 in torch 2.13), refused off Megatron and where Megatron refuses them or they
    mean nothing (a group at pp 1: no interleaved schedule; pp > 1 is
    ``ledger.pipeline.check``'s)."""
    if cfg.wgrad_deferral is not None:
        _megatron_only(cfg, fw, "wgrad_deferral", f"--wgrad-deferral {cfg.wgrad_deferral}",
                       "--defer-embedding-wgrad-compute")
        problem = deferral_problem(cfg.pp, cfg.grad_accumulation_fusion, cfg.wgrad_deferral)
        if problem is not None:
            raise LedgerError("wgrad_deferral", f"--wgrad-deferral {cfg.wgrad_deferral} "
                                                f"{problem}")
    if cfg.vp_group is not None:
        _megatron_only(cfg, fw, "vp_group", f"--vp-group {cfg.vp_group}",
                       "--microbatch-group-size-per-virtual-pipeline-stage")
        if cfg.pp == 1:
            raise LedgerError("vp_group", f"--vp-group {cfg.vp_group} groups the interleaved "
                                          f"schedule's micro-batches; pp(1) has no pipeline")
