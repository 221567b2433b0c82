"""The ``train-ledger`` command. The only module that prints.

    train-ledger                      the seed's six placements
    train-ledger report MODEL ...     one placement (Megatron-style flags, --json)
    train-ledger models               presets with exact parameter counts
    train-ledger toys zero|tp|cp|pp|ep|all   the mechanisms on real torch.distributed
    train-ledger verify                   PyTorch's own strategies measured against the ledger
    train-ledger schedule KIND --pp P --microbatches M   a pipeline time line
    train-ledger estimate MODEL ... --gpu NAME --global-batch B   step time and MFU
    train-ledger layout --tp 4 --dp 2 --pp 2              ranks, groups and links
    train-ledger plan MODEL --gpus N --gpu NAME --global-batch B   the best placements

Bad input prints one line ``error: ...`` on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ledger.errors import LedgerError
from ledger.memory import OPTIMIZER_MOMENTS, PRECISIONS
from ledger.model import PRESETS, ModelSpec
from ledger.schedules import KINDS as SCHEDULES


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str):  # noqa: D102
        raise LedgerError("usage", f"{self.prog}: {message}")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """One flag per ModelSpec field (``ledger.cli_model.FLAGS``)."""
    from ledger.cli_model import add_model_flags

    add_model_flags(p)


def _add_parallel_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("placement (Megatron spellings accepted)")
    g.add_argument("--tp", "--tensor-model-parallel-size", type=int, default=1)
    g.add_argument("--pp", "--pipeline-model-parallel-size", type=int, default=1)
    g.add_argument("--dp", "--data-parallel-size", type=int,
                   help="default: what --gpus leaves after tp*cp*pp, else 1")
    g.add_argument("--cp", "--context-parallel-size", type=int, default=1)
    g.add_argument("--ep", "--expert-model-parallel-size", type=int, default=1)
    g.add_argument("--zero", type=int, default=0, help="ZeRO stage 0..3 (3 = FSDP)")
    g.add_argument("--use-distributed-optimizer", action="store_true",
                   help="Megatron's distributed optimizer: ZeRO-1")
    g.add_argument("--no-reshard", action="store_true",
                   help="ZeRO-3 keeps params gathered between forward and backward")
    g.add_argument("--hsdp-shard", type=int)
    g.add_argument("--no-sp", action="store_true", help="TP without sequence parallelism")
    g.add_argument("--cp-kind", choices=("ring", "ulysses"), default="ring")
    g.add_argument("--micro-batch", "--micro-batch-size", type=int, default=1)
    g.add_argument("--microbatches", type=int, help="micro-batches per step per pipeline")
    g.add_argument("--global-batch", "--global-batch-size", type=int,
                   help="sequences per step; sets microbatches = B / (dp * micro_batch)")
    g.add_argument("--vp", type=int, default=1, help="virtual stages per PP rank")
    g.add_argument("--schedule", choices=SCHEDULES,
                   help="pipeline schedule (default 1f1b, interleaved when --vp > 1)")
    g.add_argument("--capacity-factor", type=float, default=1.0)
    g.add_argument("--gpus", type=int, help="world size to check the placement against")
    g.add_argument("--gpus-per-node", type=int, default=8)
    g.add_argument("--precision", choices=tuple(PRECISIONS),
                   help="bytes per state as this table says (default: the framework's)")
    g.add_argument("--optimizer", choices=tuple(OPTIMIZER_MOMENTS), default="adam")
    g.add_argument("--recompute", choices=("none", "selective", "full"), default="none",
                   help="activation recompute (Megatron's --recompute-granularity)")
    g.add_argument("--no-flash", action="store_true", help="materialised attention scores")
    g.add_argument("--grad-accumulation", choices=("sharded", "unsharded"),
                   help="ZeRO-2/3: reduce-scatter every micro-batch (sharded) or accumulate "
                        "the full gradient and reduce once (unsharded); default: the "
                        "framework's")
    _add_framework_flag(g)


def _add_framework_flag(g) -> None:
    from ledger.frameworks import DEFAULT, FRAMEWORKS

    g.add_argument("--framework", choices=tuple(FRAMEWORKS), default=DEFAULT,
                   help="whose conventions: bytes per state, when collectives run, what "
                        f"layers save (default {DEFAULT}; 'ideal' is the seed's accounting)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="train-ledger", description="Parallel training as state placement.")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    sub.add_parser("seed", help="the seed's six placements (the default)")
    sub.add_parser("models", help="presets with exact parameter counts")
    sub.add_parser("toys", help="each mechanism on real torch.distributed (torch extra)",
                   add_help=False)
    sub.add_parser("verify", help="PyTorch's FSDP2 / DTensor TP / pipelining vs the ledger",
                   add_help=False)
    r = sub.add_parser("report", help="the ledger of one placement")
    _add_model_flags(r)
    _add_parallel_flags(r)
    r.add_argument("--gpu", help="GPU preset to hold the memory against (train-ledger gpus)")
    r.add_argument("--json", action="store_true")
    e = sub.add_parser("estimate", help="step time, MFU and where the time goes")
    _add_model_flags(e)
    _add_parallel_flags(e)
    e.add_argument("--gpu", default="h100-sxm", help="GPU preset (see --help of models)")
    e.add_argument("--system", help="a custom system, JSON or TOML with units in the keys")
    e.add_argument("--tp-overlap", action="store_true", help="overlap TP comm with GEMMs")
    e.add_argument("--json", action="store_true")
    pl = sub.add_parser("plan", help="search every placement, rank by step time")
    _add_model_flags(pl)
    pl.add_argument("--gpus", type=int, required=True)
    pl.add_argument("--gpu", default="h100-sxm")
    pl.add_argument("--system", help="a custom system, JSON or TOML with units in the keys")
    pl.add_argument("--gpus-per-node", type=int, default=8)
    pl.add_argument("--global-batch", "--global-batch-size", type=int, required=True,
                    help="sequences per step")
    pl.add_argument("--top", type=int, default=10)
    for axis in ("tp", "pp", "cp", "dp", "ep", "vp"):
        pl.add_argument(f"--{axis}", type=int, help=f"pin {axis}")
    pl.add_argument("--zero", type=int, help="pin the ZeRO stage")
    pl.add_argument("--micro-batch", type=int, help="pin the micro-batch size")
    pl.add_argument("--recompute", choices=("none", "selective", "full"))
    pl.add_argument("--schedule", choices=SCHEDULES)
    pl.add_argument("--max-tp", type=int)
    pl.add_argument("--max-pp", type=int)
    pl.add_argument("--no-cp", action="store_true")
    pl.add_argument("--no-hsdp", action="store_true")
    pl.add_argument("--no-flash", action="store_true", help="materialised attention scores")
    _add_framework_flag(pl)
    pl.add_argument("--headroom", type=float, default=2.0,
                    help="GiB kept free below the usable capacity (default 2)")
    pl.add_argument("--baseline", help='a shape to compare with, e.g. "tp=8,cp=1,pp=16,dp=128" '
                                       "(keys: tp cp pp dp ep vp zero mb recompute schedule)")
    pl.add_argument("--json", action="store_true")
    lay = sub.add_parser("layout", help="rank <-> coordinates and which groups cross nodes")
    for axis in ("tp", "cp", "ep", "dp", "pp"):
        lay.add_argument(f"--{axis}", type=int, default=1)
    lay.add_argument("--order", default="tp-cp-ep-dp-pp")
    lay.add_argument("--gpus-per-node", type=int, default=8)
    lay.add_argument("--json", action="store_true")
    s = sub.add_parser("schedule", help="simulate a pipeline schedule and draw it")
    s.add_argument("kind", choices=SCHEDULES)
    s.add_argument("--pp", type=int, required=True)
    s.add_argument("--microbatches", type=int, required=True)
    s.add_argument("--vp", type=int, help="stages per rank (interleaved; zb-v is 2)")
    s.add_argument("--tf", type=float, default=1.0, help="forward time per stage")
    s.add_argument("--tb", type=float, default=2.0, help="full backward time per stage")
    s.add_argument("--tB", dest="t_in", type=float, help="input-gradient time (split)")
    s.add_argument("--tW", dest="t_w", type=float, help="weight-gradient time (split)")
    s.add_argument("--p2p", type=float, default=0.0, help="latency of a cross-rank hop")
    s.add_argument("--svg", help="also write the time line as an SVG file")
    s.add_argument("--json", action="store_true")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    return p


def load_model(a: argparse.Namespace) -> ModelSpec:
    """A preset, a config.json, or a custom model from flags (``ledger.cli_model``)."""
    from ledger.cli_model import load_model as load

    return load(a)


def parallel_config(a: argparse.Namespace):
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
    cfg = ParallelConfig(tp=a.tp, pp=a.pp, dp=dp, cp=a.cp, ep=a.ep, zero_stage=zero,
                         precision=a.precision,
                         sequence_parallel=not a.no_sp, cp_kind=a.cp_kind,
                         reshard_after_forward=False if a.no_reshard else None,
                         hsdp_shard=a.hsdp_shard,
                         micro_batch=a.micro_batch, num_microbatches=m or 1, vp=a.vp,
                         moe=MoESpec(capacity_factor=a.capacity_factor), schedule=a.schedule,
                         recompute=a.recompute, flash_attention=not a.no_flash,
                         framework=a.framework, grad_accumulation=a.grad_accumulation)
    if a.gpus is not None and cfg.world != a.gpus:
        raise LedgerError("gpus", f"tp({a.tp}) * cp({a.cp}) * pp({a.pp}) * dp({dp}) = "
                                  f"{cfg.world} != gpus({a.gpus})")
    return cfg


def _cmd_seed() -> str:
    from ledger.parallel import report, seed_placements

    return "\n".join(report(m, c) for m, c in seed_placements())


def _cmd_report(a: argparse.Namespace) -> str:
    from ledger.parallel import place
    from ledger.render import placement_json, placement_text

    from ledger.footprint import Capacity
    from ledger.system import system

    model, cfg = load_model(a), parallel_config(a)
    pl = place(model, cfg, precision=a.precision, optimizer=a.optimizer,
               gpus_per_node=a.gpus_per_node)
    room = None
    if a.gpu is not None:
        gpu = system(a.gpu).gpu  # an unknown name is refused with the presets listed
        room = Capacity(gpu.name, gpu.hbm_bytes)
    if a.json:
        return json.dumps(placement_json(model, cfg, pl, a.precision, a.optimizer, room),
                          indent=2)
    return placement_text(model, cfg, pl, room)


def _torch_command(module: str, argv: list[str]) -> int:
    """Hand over to a torch-backed command (toys, verify) if torch is installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise LedgerError("torch", "this command needs the torch extra: "
                                   "pip install 'train-ledger[torch]'")
    from importlib import import_module

    return import_module(module).main(argv)


def _cmd_schedule(a: argparse.Namespace) -> str:
    from ledger.pipeline import Costs, simulate
    from ledger.render_timeline import summary, svg_timeline, text_timeline, timeline_json
    from ledger.schedules import build

    for name in ("tf", "tb", "t_in", "t_w", "p2p"):
        value = getattr(a, name)
        if value is not None and (value < 0 or (value == 0 and name in ("tf", "tb"))):
            raise LedgerError(name, f"must be a positive time, got {value}")
    v = a.vp or (2 if a.kind == "zb-v" else 1)
    tb = a.tb if a.t_in is None or a.t_w is None else a.t_in + a.t_w
    sim = simulate(build(a.kind, a.pp, a.microbatches, v),
                   Costs(a.tf, tb, a.t_in, a.t_w, a.p2p))
    if a.svg:
        try:
            Path(a.svg).write_text(svg_timeline(sim))
        except OSError as e:
            raise LedgerError("svg", f"cannot write {a.svg}: {e.strerror}") from None
    if a.json:
        return json.dumps(timeline_json(sim), indent=1)
    colour = a.color == "always" or (a.color == "auto" and sys.stdout.isatty())
    return summary(sim) + "\n" + text_timeline(sim, colour)


def _cmd_estimate(a: argparse.Namespace) -> str:
    from ledger.render import estimate_json, estimate_text
    from ledger.step import estimate
    from ledger.system import load_system, system

    sysm = load_system(a.system) if a.system else system(a.gpu, a.gpus_per_node)
    model, cfg = load_model(a), parallel_config(a)
    est = estimate(model, cfg, sysm, tp_overlap=a.tp_overlap, precision=a.precision,
                   optimizer=a.optimizer)
    if a.json:
        return json.dumps(estimate_json(model, cfg, sysm, est), indent=2)
    return estimate_text(model, cfg, sysm, est)


def _cmd_layout(a: argparse.Namespace) -> str:
    from ledger.layout import Layout
    from ledger.render import layout_json, layout_text

    lay = Layout(tp=a.tp, cp=a.cp, dp=a.dp, pp=a.pp, ep=a.ep, order=a.order,
                 gpus_per_node=a.gpus_per_node)
    if lay.dp * lay.cp % lay.ep:
        raise LedgerError("ep", f"ep({a.ep}) does not divide dp({a.dp}) * cp({a.cp})")
    return json.dumps(layout_json(lay), indent=1) if a.json else layout_text(lay)


def _cmd_plan(a: argparse.Namespace) -> str:
    from ledger.render import plan_json, plan_text
    from ledger.search import Pins, plan
    from ledger.system import load_system, system

    sysm = load_system(a.system) if a.system else system(a.gpu, a.gpus_per_node)
    model = load_model(a)
    pins = Pins(tp=a.tp, pp=a.pp, cp=a.cp, dp=a.dp, ep=a.ep, vp=a.vp, zero=a.zero,
                micro_batch=a.micro_batch, recompute=a.recompute, schedule=a.schedule,
                max_tp=a.max_tp, max_pp=a.max_pp, no_cp=a.no_cp, no_hsdp=a.no_hsdp)
    for name in ("tp", "pp", "cp", "dp", "ep", "vp", "micro_batch", "max_tp", "max_pp", "top"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            raise LedgerError(name, f"must be a positive integer, got {getattr(a, name)}")
    if a.zero is not None and a.zero not in (0, 1, 2, 3):
        raise LedgerError("zero_stage", f"must be 0, 1, 2 or 3, got {a.zero}")
    bar = _progress_bar() if sys.stderr.isatty() else None
    if not a.headroom >= 0:  # also refuses nan
        raise LedgerError("headroom", f"must be >= 0 GiB, got {a.headroom}")
    result = plan(model, a.gpus, sysm, a.global_batch, a.top, pins, progress=bar,
                  framework=a.framework, flash=not a.no_flash,
                  headroom_bytes=a.headroom * 2**30, baseline=a.baseline)
    text = (json.dumps(plan_json(model, sysm, result), indent=1) if a.json
            else plan_text(model, a.gpus, sysm, result))
    return text if result.plans else (text, 1)  # nothing fits: say so, and exit 1


def _progress_bar():
    """A stderr bar for searches that run longer than a second (most take less)."""
    import time

    start = time.perf_counter()

    def show(done: int, total: int) -> None:
        if time.perf_counter() - start < 1.0:
            return
        filled = int(30 * done / max(total, 1))
        end = "\n" if done >= total else ""
        print(f"\r  costing placements [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}",
              end=end, file=sys.stderr, flush=True)
    return show


def run(argv: list[str]) -> str | tuple[str, int]:
    """Parse and run; returns the text to print (and an exit status when it is not 0).
    Raises LedgerError on bad input."""
    a = build_parser().parse_args(argv)
    if a.cmd in (None, "seed"):
        return _cmd_seed()
    if a.cmd == "schedule":
        return _cmd_schedule(a)
    if a.cmd == "estimate":
        return _cmd_estimate(a)
    if a.cmd == "layout":
        return _cmd_layout(a)
    if a.cmd == "plan":
        return _cmd_plan(a)
    if a.cmd == "models":
        from ledger.render import models_table

        return models_table(f() for f in PRESETS.values())
    return _cmd_report(a)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["toys"]:
            return _torch_command("ledger.toys.__main__", argv[1:])
        if argv[:1] == ["verify"]:
            return _torch_command("ledger.verify.__main__", argv[1:])
        out = run(argv)
    except LedgerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text, code = out if isinstance(out, tuple) else (out, 0)
    print(text)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
