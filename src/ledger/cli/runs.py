"""The command line's whole run (``ledger.run``): its flags, its settings and phases from
them, the estimate's run, the planner's ranking by time to train, the published runs."""
from __future__ import annotations

import argparse

from ledger.errors import LedgerError
from ledger.io import (MAX_MTBF_HOURS, MAX_PRICE, MAX_PUE, MAX_RELAUNCH_MIN, MAX_STEPS,
                       MAX_STORAGE_GBPS, MAX_TOKENS, MIN_STORAGE_GBPS, count, real)

# plan --tokens re-prices this many of the fastest placements as whole runs: a run's
# overheads differ between placements only through the checkpoint's largest share per
# GPU, a small part of the wall time, so the quickest run is among the fastest steps
RUN_CANDIDATES = 200
RUN_FLAGS = ("phases", "usd_per_gpu_hour", "pue", "ckpt_GBps", "ckpt_GBps_per_node",
             "ckpt_interval", "ckpt_async", "gpu_mtbf_hours", "relaunch_min")


def add_run_flags(p: argparse.ArgumentParser, phases: bool = True) -> None:
    """A whole run: its tokens (or phases) and what its overheads depend on."""
    from ledger.run import DEFAULT_GPU_MTBF_S, DEFAULT_RELAUNCH_S, DEFAULT_STORAGE

    g = p.add_argument_group("a whole run (ledger.run; docs/run.md)")
    g.add_argument("--tokens", type=real(MAX_TOKENS, 1.0, closed_low=True),
                   help="tokens to train on: adds days, GPU-hours, cost, energy, "
                        "checkpoints and failures")
    if phases:
        g.add_argument("--phases", metavar="FILE",
                       help="a run of phases (TOML or JSON): tokens or steps, seq_len, "
                            "global_batch, rampup, placement per phase")
    g.add_argument("--usd-per-gpu-hour", type=prices, metavar="USD | GPU=USD,...",
                   help="price of a GPU-hour: one for the chosen GPU, or one per GPU type "
                        "(h100-sxm=2.5,b200=4)")
    g.add_argument("--pue", type=real(MAX_PUE, 1.0, closed_low=True),
                   help="power usage effectiveness (default 1.0: the GPUs' board power only)")
    store = g.add_mutually_exclusive_group()
    storage = real(MAX_STORAGE_GBPS, MIN_STORAGE_GBPS, closed_low=True)
    store.add_argument("--ckpt-GBps", dest="ckpt_GBps", type=storage,
                       help="checkpoint storage bandwidth of the whole job, GB/s")
    store.add_argument("--ckpt-GBps-per-node", dest="ckpt_GBps_per_node", type=storage,
                       help="checkpoint storage bandwidth per node, GB/s (default "
                            f"{DEFAULT_STORAGE.bytes_per_s / 1e9:g})")
    g.add_argument("--ckpt-interval", type=count(MAX_STEPS),
                   help="steps between checkpoints (default: Daly's optimum)")
    g.add_argument("--ckpt-async", action="store_true",
                   help="asynchronous saves: only the device-to-host copy blocks")
    g.add_argument("--gpu-mtbf-hours", type=real(MAX_MTBF_HOURS),
                   help="per-GPU hours between interruptions (default "
                        f"{DEFAULT_GPU_MTBF_S / 3600:,.0f}: Llama 3's 419 in 54 days on "
                        "16,384 H100)")
    g.add_argument("--relaunch-min", type=real(MAX_RELAUNCH_MIN, 0.0, closed_low=True),
                   help="minutes to detect a failure and relaunch, before loading the "
                        f"checkpoint (default {DEFAULT_RELAUNCH_S / 60:g}: MegaScale)")


def prices(text: str):
    """argparse type: a price (USD per GPU-hour), or ``gpu=price,...``, one per GPU type."""
    one = real(MAX_PRICE)
    if "=" not in text:
        return one(text)
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if not name.strip() or not value:
            raise argparse.ArgumentTypeError(f"must be USD or GPU=USD,..., got {text!r}")
        out[name.strip().lower()] = one(value.strip())
    return out


def price_of(a: argparse.Namespace, gpu: str) -> float | None:
    """The price per hour of ``gpu`` (the run's): the one given, or its entry in a per-GPU
    list."""
    given = getattr(a, "usd_per_gpu_hour", None)
    if not isinstance(given, dict):
        return given
    if gpu not in given:
        raise LedgerError("usd_per_gpu_hour", f"no price for {gpu} (the GPU this run uses); "
                                              f"given: {', '.join(given)}")
    return given[gpu]


def run_settings(a: argparse.Namespace, gpu: str = ""):
    """A whole run's settings from the flags (``ledger.run.RunSettings``), or None when
    neither --tokens nor --phases asks for a run (then no run flag may be given)."""
    from ledger.run import RunSettings, Storage

    if getattr(a, "tokens", None) is None and getattr(a, "phases", None) is None:
        launched = getattr(a, "launch", None)
        given = [f for f in RUN_FLAGS if getattr(a, f, None) not in (None, False)
                 and not (launched and f in launched.flags)]  # a launch file's apply quietly
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise LedgerError(given[0], f"{flag} prices a whole run: give --tokens N"
                              + (" or --phases FILE" if a.cmd == "estimate" else ""))
        return None
    if getattr(a, "finetune", None) is not None:
        raise LedgerError("tokens", f"a whole run prices a pre-training checkpoint (every "
                                    f"parameter and its optimizer state); --finetune "
                                    f"{a.finetune}'s checkpoints are not modelled")
    if getattr(a, "phases", None) is not None and a.tokens is not None:
        raise LedgerError("tokens", "give --tokens or --phases (whose phases say their "
                                    "tokens), not both")
    base = RunSettings()
    storage = base.storage
    if a.ckpt_GBps is not None:
        storage = Storage(a.ckpt_GBps * 1e9, per_node=False)
    elif a.ckpt_GBps_per_node is not None:
        storage = Storage(a.ckpt_GBps_per_node * 1e9, per_node=True)
    return RunSettings(
        storage=storage, ckpt_mode="async" if a.ckpt_async else "sync",
        ckpt_interval_steps=a.ckpt_interval,
        gpu_mtbf_s=base.gpu_mtbf_s if a.gpu_mtbf_hours is None else a.gpu_mtbf_hours * 3600,
        relaunch_s=base.relaunch_s if a.relaunch_min is None else a.relaunch_min * 60,
        pue=base.pue if a.pue is None else a.pue, usd_per_gpu_hour=price_of(a, gpu))


def run_phases(a: argparse.Namespace, model, cfg) -> list:
    """The run's phases: --phases FILE, or one phase of --tokens at the placement's batch."""
    from ledger.run import Phase

    if getattr(a, "phases", None) is not None:
        from ledger.io import load_phases

        return load_phases(a.phases, cfg, model.seq_len)
    return [Phase(tokens=a.tokens)]


def top(a: argparse.Namespace, settings) -> int:
    """How many placements the planner returns: --top, or the candidates of a run."""
    return a.top if settings is None else max(a.top, RUN_CANDIDATES)


def add_run(out, whole, sysm):
    """The estimate's output - its JSON object or its text - with the whole run added."""
    if whole is None:
        return out
    from ledger.render import run_json, run_lines

    if isinstance(out, dict):
        return out | {"run": run_json(whole)}
    return out + "\n" + "\n".join(run_lines(whole, sysm.gpu.name))


def whole_run(a: argparse.Namespace, model, cfg, sysm, settings):
    """The estimate's whole run, or None without --tokens / --phases."""
    if settings is None:
        return None
    from ledger.run import whole_run as price

    return price(model, cfg, sysm, run_phases(a, model, cfg), settings,
                 tp_overlap=a.tp_overlap, precision=a.precision, optimizer=a.optimizer)


def rank_plans(a: argparse.Namespace, model, sysm, result, settings):
    """(runs, placements priced): the plan's placements re-ranked by time to train (the
    result's list replaced), or (None, their count) without --tokens."""
    priced = len(result.plans)
    if settings is None or not result.plans:
        return None, priced
    from ledger.run import rank_by_time_to_train

    ranked = rank_by_time_to_train(model, sysm, result.plans, a.tokens, settings,
                                   a.optimizer)[:a.top]
    result.plans = [p for p, _ in ranked]
    return [r for _, r in ranked], priced


def published_runs(a: argparse.Namespace, to_json) -> str:
    """``train-ledger whole-runs``: the published runs against the run layer."""
    from ledger.render.run import held_json, held_table
    from ledger.run.published import held, whole_runs

    helds = [held(w) for w in whole_runs()]
    return to_json([held_json(h) for h in helds], indent=1) if a.json else held_table(helds)
