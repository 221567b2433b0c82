"""The ``train-ledger`` command's subcommands (``ledger.cli``, with ``render``, is the only
code that prints).

    train-ledger                      the seed's six placements
    train-ledger report MODEL ...     one placement (Megatron-style flags, --json)
    train-ledger models               presets with exact parameter counts
    train-ledger toys zero|tp|cp|pp|ep|all   the mechanisms on real torch.distributed
    train-ledger verify                   PyTorch's own strategies measured against the ledger
    train-ledger schedule KIND --pp P --microbatches M   a pipeline time line
    train-ledger estimate MODEL ... --gpu NAME --global-batch B   step time and MFU
    train-ledger layout --tp 4 --dp 2 --pp 2              ranks, groups and links
    train-ledger plan MODEL --gpus N --gpu NAME --global-batch B   the best placements
    train-ledger gpus                 GPU presets with their figures (--json)
    train-ledger serve MODEL --tp T --context N --gpu NAME   serving it with vLLM
    train-ledger whole-runs           published whole runs against the run model (--json)
    train-ledger --version

report, estimate, plan and serve also take --from-megatron FILE / --from-torchtitan FILE (the
model and placement of a launch) and --html FILE (a self-contained page of charts).

Bad input prints one line ``error: ...`` on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys

from ledger.cli.args import build_parser
from ledger.cli.inputs import backward_time, finetune, fp8_precision, plan_model
from ledger.cli.inputs import system as _system
from ledger.cli.step_flags import plan_facts
from ledger.cli.placement_config import _model_and_config, _warn, check_finetune
from ledger.cli.runs import add_run, published_runs, rank_plans, run_settings, top, whole_run
from ledger.errors import LedgerError, clip
from ledger.io import check_finite_json, check_world
from ledger.model import PRESETS


def _cmd_seed() -> str:
    from ledger.parallel import seed_placements
    from ledger.render import report_text

    from ledger.placement import place
    from ledger.render.units import fmt_bytes
    from ledger.system import GPUS

    gpu = GPUS["h100-sxm"]  # the GPU the article's placements are held against
    head = (f"The seed article's six placements, as it writes them (the ideal convention, "
            f"no recompute), each held against an {gpu.name} ({fmt_bytes(gpu.hbm_bytes)}); "
            f"'train-ledger report' sizes your own.\n")
    out = []
    for m, c in seed_placements():
        peak = place(m, c).peak_bytes
        fits = "fits" if peak <= gpu.hbm_bytes else (
            f"does not fit: over by {fmt_bytes(peak - gpu.hbm_bytes)} (add --recompute full "
            f"or more model parallelism)")
        out.append(report_text(m, c) + f"\n  {'on ' + gpu.name:<20}{fits}")
    return head + "\n".join(out)


def report_placement(a: argparse.Namespace):
    """report's model, placement, system and ledger from its parsed flags (a launch file
    already merged: ``ledger.cli.inputs.source``); ``ledger.cli.goldens`` prices
    Megatron's functional tests on this same path."""
    from ledger.parallel import place

    model, cfg = _model_and_config(a)
    node = _system(a)  # an unknown name is refused with the presets listed
    pl = place(model, cfg, precision=a.precision, optimizer=a.optimizer,
               gpus_per_node=node.gpus_per_node, gpus_per_domain=node.gpus_per_domain,
               gpu=node.gpu, nvls=node.nvls)
    return model, cfg, node, pl


def _cmd_report(a: argparse.Namespace) -> str:
    from ledger.placement import Capacity
    from ledger.render import domain_line, domains_json, placement_json, placement_text

    model, cfg, node, pl = report_placement(a)
    _warn_idle(cfg, pl.bubble_fraction)
    room = Capacity(node.gpu.name, node.gpu.hbm_bytes, host_bytes=node.host_memory_bytes)
    if a.html:
        from ledger.render import placement_page

        _write(a.html, placement_page(model, cfg, pl, room.usable_bytes if room else None))
    if a.json:
        return _json(placement_json(model, cfg, pl, a.precision, a.optimizer, room)
                     | domains_json(cfg, node), indent=2)
    return "\n".join([placement_text(model, cfg, pl, room), *domain_line(cfg, node)])


def _torch_command(module: str, argv: list[str]) -> int:
    """Hand over to a torch-backed command (toys, verify) if torch is installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise LedgerError("torch", "this command needs the torch extra: "
                                   "pip install 'train-ledger[torch]'")
    from importlib import import_module

    return import_module(module).main(argv)


def _cmd_schedule(a: argparse.Namespace) -> str:
    from ledger.pipeline import Costs, build, check_cells, check_drawable, simulate
    from ledger.render import summary, svg_timeline, text_timeline, timeline_json

    from ledger.config import TWO_STAGES
    from ledger.pipeline import KINDS as SCHEDULES

    if a.kind and a.schedule and a.kind != a.schedule:
        raise LedgerError("schedule", f"given twice: {a.kind} and --schedule {a.schedule}")
    a.kind = a.kind or a.schedule
    if a.kind is None:
        raise LedgerError("schedule", "schedule needs --schedule (one of "
                                      f"{', '.join(SCHEDULES)})")
    v = a.vp or (2 if a.kind in TWO_STAGES else 1)
    check_drawable(a.kind, a.pp, a.microbatches, v)
    tb = backward_time(a)
    sim = simulate(build(a.kind, a.pp, a.microbatches, v),
                   Costs(a.tf, tb, a.t_in, a.t_w, a.p2p))
    if a.svg or not a.json:
        check_cells(sim)
    if a.svg:
        _write(a.svg, svg_timeline(sim), "svg")
    if a.json:
        return _json(timeline_json(sim), indent=1)
    colour = a.color == "always" or (a.color == "auto" and sys.stdout.isatty())
    return summary(sim) + "\n" + text_timeline(sim, colour)


def _cmd_estimate(a: argparse.Namespace) -> str:
    from ledger.render import estimate_json, estimate_text
    from ledger.step import estimate

    model, cfg = _model_and_config(a)
    sysm = _system(a)
    settings = run_settings(a, sysm.gpu.name.rstrip("*"))
    est = estimate(model, cfg, sysm, tp_overlap=a.tp_overlap, precision=a.precision,
                   optimizer=a.optimizer)
    _warn_idle(cfg, est.placement.bubble_fraction)
    whole = whole_run(a, model, cfg, sysm, settings)  # None without --tokens / --phases
    if a.html:
        from ledger.render import placement_page

        _write(a.html, placement_page(model, cfg, est.placement, est.memory_capacity_bytes,
                                      est, sysm, whole))
    if a.json:
        return _json(add_run(estimate_json(model, cfg, sysm, est), whole, sysm), indent=2)
    return add_run(estimate_text(model, cfg, sysm, est), whole, sysm)


def _cmd_layout(a: argparse.Namespace) -> str:
    from ledger.placement import Layout
    from ledger.render import layout_json, layout_text

    check_world(tp=a.tp, cp=a.cp, dp=a.dp, pp=a.pp)
    if a.etp is None and a.dp * a.cp % a.ep:
        raise LedgerError("ep", f"ep({a.ep}) does not divide dp({a.dp}) * cp({a.cp})")
    from ledger.system import system as preset

    host, domain = a.gpus_per_node, a.gpus_per_domain
    if a.gpu is not None or a.system:
        from ledger.io import load_system

        sysm = load_system(a.system, host, domain) if a.system else preset(a.gpu, host, domain)
        host, domain = sysm.gpus_per_node, sysm.gpus_per_domain
    lay = Layout(tp=a.tp, cp=a.cp, dp=a.dp, pp=a.pp, ep=a.ep, etp=a.etp, order=a.order,
                 gpus_per_node=host or 8, gpus_per_domain=domain)
    return _json(layout_json(lay), indent=1) if a.json else layout_text(lay)


def _cmd_plan(a: argparse.Namespace) -> str:
    from ledger.plan import Pins, min_gpus, plan
    from ledger.render import plan_json, plan_text

    model = plan_model(a)
    sysm = _system(a)
    ft = finetune(a)
    if ft is not None:
        check_finetune(model, ft)
    settings = run_settings(a, sysm.gpu.name.rstrip("*"))
    pins = Pins(tp=a.tp, pp=a.pp, cp=a.cp, dp=a.dp, ep=a.ep, vp=a.vp, zero=a.zero,
                micro_batch=a.micro_batch, recompute=a.recompute, schedule=a.schedule,
                max_tp=a.max_tp, max_pp=a.max_pp, no_cp=a.no_cp, no_hsdp=a.no_hsdp,
                overlap_grad_reduce=a.overlap_grad_reduce,
                overlap_param_gather=a.overlap_param_gather, ep_overlap=a.ep_overlap)
    bar = _progress_bar() if sys.stderr.isatty() else None
    kw = dict(top=top(a, settings), pins=pins, progress=bar, framework=a.framework,
              flash=not (a.no_flash or getattr(a, "transformer_impl", None) == "local"),
              headroom_bytes=a.headroom * 2**30, baseline=a.baseline,
              finetune=ft, optimizer=a.optimizer, precision=a.precision, facts=plan_facts(a))
    gpus = a.gpus
    if a.min_gpus:
        on_world = _world_line if sys.stderr.isatty() else None
        try:
            gpus, result = min_gpus(model, sysm, a.global_batch, a.max_gpus, on_world, **kw)
        finally:
            if on_world:
                print(file=sys.stderr)  # end the line the worlds were counted on
    else:
        result = plan(model, gpus, sysm, a.global_batch, **kw)
    from ledger.cli.advice import line, other_framework

    other = None if a.min_gpus else other_framework(model, sysm, gpus, a.global_batch, kw,
                                                    result, a.framework)
    runs, priced = rank_plans(a, model, sysm, result, settings)
    if a.html:
        _write(a.html, _plan_html(model, a, sysm, result, runs[0] if runs else None))
    if a.json:
        better = {k: v for k, v in (other or {}).items() if k != "plan"}
        return _json(plan_json(model, sysm, result, runs) | {"gpus": gpus} |
                     ({"better_framework": better} if other else {}), indent=1)
    text = plan_text(model, gpus, sysm, result, runs, priced) + line(other)
    if a.min_gpus:
        batch = " (the default with --finetune)" if getattr(a, "batch_defaulted", False) else ""
        text += (f"\n  smallest world that fits: {gpus} x {sysm.gpu.name}, global batch "
                 f"{a.global_batch} sequences{batch}")
    return text if result.plans else (text, 1)  # nothing fits: say so, and exit 1


def _plan_html(model, a, sysm, result, run=None) -> str:
    """The plan page, with #1 estimated again for its charts."""
    from ledger.render import plan_page
    from ledger.step import estimate

    if not result.plans:
        return plan_page(model, a.gpus, sysm, result)
    best = result.plans[0]
    est = estimate(model, best.config, sysm, tp_overlap=best.tp_overlap)
    return plan_page(model, a.gpus, sysm, result, est.placement, est, run)


def _cmd_serve(a: argparse.Namespace):
    from ledger.cli.inputs import model
    from ledger.cli.serve_inputs import serve_config
    from ledger.render import serve_json, serve_text
    from ledger.serve import serve

    spec, sysm = model(a), _system(a)
    est = serve(spec, serve_config(a, spec), sysm)
    text = _json(serve_json(spec, sysm, est), indent=2) if a.json else serve_text(spec, sysm, est)
    return text if est.starts else (text, 1)  # the engine would not start


def _write(path: str, text: str, field: str = "html") -> None:
    from ledger.io.files import write_whole

    write_whole(path, text, field)  # whole or not at all: the previous page kept


MAX_ERROR_CHARS = 4000  # an error line, at most: every value in it is clipped where made,
# this catches one that was not (a key of a launch file, say), and its control characters
FILE_FLAGS = ("system", "phases", "from_megatron", "from_torchtitan", "html", "svg")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse, naming the subcommand when an argument is not its own."""
    parser = build_parser()
    a, extra = parser.parse_known_args(argv)
    if extra:  # one line: what the command does not take, and what it does
        raise LedgerError("usage", parser._command(a).unknown(extra))
    for name, value in vars(a).items():
        if isinstance(value, list):  # argparse drops a value of '--' and leaves []
            raise LedgerError(name, "needs a value, got '--'")
        if value == "" and name in FILE_FLAGS:  # not "no file": a path that names nothing
            raise LedgerError(name, "the path is empty ('')")
    fp8_precision(a)
    return a


def _json(obj, indent: int) -> str:
    """JSON text, refused (one line, naming the key) rather than printed with NaN or
    Infinity, which are not JSON."""
    try:
        return json.dumps(obj, indent=indent, allow_nan=False)
    except ValueError:
        check_finite_json(obj)
        raise


def _emit(text: str, code: int) -> int:
    """Print the result; a reader that closed the pipe early (``| head``) ends it quietly."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141 if code == 0 else code  # 128 + SIGPIPE, as a shell reports it
    return code


def _note_model(a: argparse.Namespace) -> None:
    """The config.json reader's notes (a composite read as its text model): a line each."""
    for note in getattr(a, "model_notes", ()):
        print(f"note: {note}", file=sys.stderr)


def _warn_idle(cfg, bubble: float) -> None:
    """Say so when too few micro-batches leave a pipeline mostly idle."""
    if cfg.pp > 1 and (cfg.num_microbatches == 1 or bubble >= 0.5):
        _warn(f"microbatches({cfg.num_microbatches}) on pp({cfg.pp}) leaves the pipeline "
              f"{bubble:.0%} idle; raise --microbatches or --global-batch")


def _world_line(gpus: int, k: int, total: int) -> None:
    """--min-gpus on a terminal: which world is being planned, of how many at most."""
    print(f"\r  smallest world: planning {gpus:,} GPUs (world {k} of at most {total})",
          end="", file=sys.stderr, flush=True)


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
    a = parse_args(argv)
    if a.cmd == "estimate" and a.batch:  # each line of the file an estimate of its own
        from ledger.cli.batch import run_batch

        return run_batch(argv, a.batch, a.json, run)
    if a.cmd in ("report", "estimate", "plan", "serve"):
        from ledger.cli.inputs import source

        from ledger.cli.inputs import messages

        a.launch = source(a)
        for line in messages(a) if a.cmd != "serve" else ():  # a launch's notes are about
            print(line, file=sys.stderr)  # its training run, which serving does not read
    if a.cmd in ("report", "estimate", "plan", "serve"):
        from ledger.cli.inputs import mark_approximate, unpriced_messages

        out = {"report": _cmd_report, "estimate": _cmd_estimate, "plan": _cmd_plan,
               "serve": _cmd_serve}[a.cmd](a)
        _note_model(a)
        for line in unpriced_messages(a):
            print(line, file=sys.stderr)
        text, code = out if isinstance(out, tuple) else (out, 0)
        return mark_approximate(a, text), code
    if a.cmd in (None, "seed"):
        return _cmd_seed()
    if a.cmd == "schedule":
        return _cmd_schedule(a)
    if a.cmd == "layout":
        return _cmd_layout(a)
    if a.cmd == "models":
        from ledger.render import models_json, models_table

        specs = [f() for f in PRESETS.values()]
        return _json(models_json(specs), indent=1) if a.json else models_table(specs)
    if a.cmd == "whole-runs":
        return published_runs(a, _json)
    if a.cmd == "gpus":
        from ledger.render import gpus_json, gpus_table

        return _json(gpus_json(), indent=1) if a.json else gpus_table()
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
        print(f"error: {clip(e, MAX_ERROR_CHARS)}", file=sys.stderr)  # one line, however long
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it
    text, code = out if isinstance(out, tuple) else (out, 0)
    return _emit(text, code)


if __name__ == "__main__":
    raise SystemExit(main())
