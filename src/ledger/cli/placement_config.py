"""The model and placement of report, estimate and plan, built from their flags:
``ParallelConfig`` with dp and micro-batches derived, a fine-tune checked against the model.
``ledger.cli.commands`` runs the commands on them.
"""
from __future__ import annotations

import argparse
import sys

from ledger.cli.inputs import finetune, stage_split
from ledger.cli.step_flags import step_flags
from ledger.errors import LedgerError
from ledger.io import check_world
from ledger.model import ModelSpec


def load_model(a: argparse.Namespace) -> ModelSpec:
    """A preset, a config.json, or a custom model from flags (``ledger.cli.model_flags``)."""
    from ledger.cli.model_flags import load_model as load

    return load(a)


def parallel_config(a: argparse.Namespace, model: ModelSpec | None = None):
    """ParallelConfig from flags; dp and num_microbatches may be derived."""
    from ledger.parallel import MoESpec, ParallelConfig

    model_par = a.tp * a.cp * a.pp
    dp = a.dp
    if dp is None:
        if a.gpus is not None and a.gpus % model_par:
            raise LedgerError("gpus", f"gpus({a.gpus}) is not divisible by tp({a.tp}) * "
                                      f"cp({a.cp}) * pp({a.pp}) = {model_par}")
        dp = a.gpus // model_par if a.gpus is not None else 1
    m = a.microbatches
    if a.global_batch is not None:
        from ledger.step import microbatches_for

        derived = microbatches_for(a.global_batch, dp, a.micro_batch)
        if m is not None and m != derived:
            raise LedgerError("microbatches", f"microbatches({m}) != global_batch"
                              f"({a.global_batch}) / (dp({dp}) * micro_batch({a.micro_batch}))")
        m = derived
    zero = 1 if a.use_distributed_optimizer and a.zero == 0 else a.zero
    check_world(tp=a.tp, cp=a.cp, pp=a.pp, dp=dp)
    split, vp_ = stage_split(a, model)
    cfg = ParallelConfig(tp=a.tp, pp=a.pp, dp=dp, cp=a.cp, ep=a.ep, etp=a.etp,
                         moe_dispatcher=a.moe_dispatcher, zero_stage=zero,
                         precision=a.precision,
                         sequence_parallel=not a.no_sp, cp_kind=a.cp_kind,
                         reshard_after_forward=False if a.no_reshard else True if getattr(a, "reshard", False)
                         else None,
                         hsdp_shard=_shard_group(a, dp, zero),
                         micro_batch=a.micro_batch, num_microbatches=m or 1, vp=vp_,
                         vp_group=getattr(a, "vp_group", None),
                         moe=MoESpec(capacity_factor=a.capacity_factor,
                                     imbalance=a.moe_imbalance,
                                     pad_to_capacity=getattr(a, "pad_to_capacity", False)), schedule=a.schedule,
                         recompute=a.recompute, flash_attention=not (
                             a.no_flash or getattr(a, "transformer_impl", None) == "local"),
                         framework=a.framework, grad_accumulation=a.grad_accumulation,
                         finetune=finetune(a), offload=a.offload,
                         overlap_grad_reduce=a.overlap_grad_reduce,
                         overlap_param_gather=a.overlap_param_gather, ep_overlap=a.ep_overlap,
                         overlap_p2p=getattr(a, "overlap_p2p", None), stage_layers=split,
                         **step_flags(a))
    if cfg.finetune is not None and model is not None:
        check_finetune(model, cfg.finetune)
    if a.gpus is not None and cfg.world != a.gpus:
        raise LedgerError("gpus", f"tp({a.tp}) * cp({a.cp}) * pp({a.pp}) * dp({dp}) = "
                                  f"{cfg.world} != gpus({a.gpus})")
    return cfg


def check_finetune(model, ft) -> None:
    """The model-dependent checks of a fine-tune: its targets resolve on this model, its
    frozen layers exist."""
    from ledger.finetune import resolve
    from ledger.finetune.lora import check_layers

    check_layers(model, ft)
    if ft.adapters:
        t = resolve(model, ft)
        if t.unmatched:
            _warn(f"--lora-targets: no weight matrix of {model.name} is named "
                  f"{', '.join(t.unmatched)}: left out (peft ignores a name that matches "
                  f"no module, and refuses one that names a norm or a block)")
        from ledger.finetune.lora import unadapted

        skipped = unadapted(model, ft, t)
        if skipped:  # peft's all-linear wraps nn.Linear modules only
            print(f"note: --lora-targets all-linear adapts modules only, as peft does: "
                  f"{model.name}'s {', '.join(skipped)} are parameters (fused experts, a "
                  f"custom router), get no adapter and stay frozen", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _model_and_config(a: argparse.Namespace):
    """Model and placement, checked against each other where the core does not."""
    from ledger.cli.inputs import model as load
    model = load(a)
    if a.schedule is not None and a.pp == 1:
        raise LedgerError("schedule", f"a pipeline schedule needs pp > 1, got "
                                      f"--schedule {a.schedule} with pp(1)")
    cfg = parallel_config(a, model)  # its pipeline is checked against the framework by the core
    return model, cfg


def _shard_group(a, dp: int, zero: int) -> int | None:
    """--hsdp-shard, or Megatron's partial distributed optimizer: N instances each shard the
    optimizer state over dp x cp / N ranks (the intra-partial DP group, parallel_state.py
    L924-929, L984-1000 @d98e8a64), reduce-scatter the gradients there and all-reduce them
    across the instances (param_and_grad_buffer.py L680-700) - HSDP at ZeRO-1."""
    from ledger.frameworks.distopt_checks import instances_problem

    n = getattr(a, "num_distributed_optimizer_instances", None) or 1
    if n == 1:
        return a.hsdp_shard
    field = "num_distributed_optimizer_instances"
    if a.hsdp_shard is not None or a.framework != "megatron" or zero != 1:
        shard = "" if a.hsdp_shard is None else f" hsdp_shard({a.hsdp_shard})"
        raise LedgerError(field, f"{n} distributed-optimizer instances shard Megatron's "
                                 f"ZeRO-1 (no --hsdp-shard), got framework {a.framework} "
                                 f"zero {zero}{shard}")
    etp = a.tp if a.etp is None else a.etp
    problem = instances_problem(n, a.tp, a.cp, dp, a.ep, etp)
    if problem is not None:
        raise LedgerError(field, problem)
    return dp * a.cp // n
