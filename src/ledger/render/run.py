"""Text and JSON views of a whole run (``ledger.run.RunEstimate``): days split into
training, checkpointing and failure loss; GPU-hours, cost, energy; the checkpoint, its
interval, the interruptions and the goodput; the phases. Units formatted here only.
"""
from __future__ import annotations

from ledger.render.units import fmt_bytes

DAY, HOUR = 86400.0, 3600.0


def _si(x: float) -> str:
    """12.3 K / 4.56 M / 7.89 B / 1.23 T."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {unit}"
    return f"{x:,.0f}"


def phases(run) -> list[dict]:
    """The run's segments gathered back into its phases, in order."""
    out: dict[int, dict] = {}
    for s in run.segments:
        p = out.setdefault(id(s.segment.phase), {
            "name": s.segment.phase.name, "tokens": 0.0, "steps": 0, "train_s": 0.0,
            "wall_s": 0.0, "checkpointing_s": 0.0, "lost_s": 0.0, "interruptions": 0.0,
            "gpu_hours": 0.0, "seq_len": s.segment.seq_len, "gpus": s.gpus,
            "global_batch": [], "segments": 0, "last": s})
        p["tokens"] += s.segment.tokens
        p["steps"] += s.segment.steps
        for k in ("train_s", "wall_s", "checkpointing_s", "lost_s", "interruptions",
                  "gpu_hours"):
            p[k] += getattr(s, k)
        p["global_batch"].append(s.segment.global_batch)
        p["segments"] += 1
        p["last"] = s
    return list(out.values())


def _phase_json(p: dict) -> dict:
    s = p.pop("last")  # the full-batch segment: its checkpoint and interval
    batches = p.pop("global_batch")
    return p | {"global_batch": batches[-1], "global_batch_first": batches[0],
                "step_s": p["train_s"] / p["steps"], "days": p["wall_s"] / DAY,
                "checkpoint": _ckpt_json(s), "job_mtbf_s": s.job_mtbf_s,
                "restart_s": s.restart_s}


def _ckpt_json(s) -> dict:
    ck = s.checkpoint
    return {"bytes": ck.bytes, "bytes_per_gpu": ck.bytes_per_gpu, "write_s": ck.write_s,
            "d2h_s": ck.d2h_s, "blocking_s": ck.blocking_s, "load_s": ck.load_s,
            "interval_s": s.interval_s, "interval_steps": s.interval_steps, "mode": ck.mode,
            "layout": ck.layout}


def run_json(run) -> dict:
    """The whole run as JSON: seconds, bytes, GPU-hours, MWh, USD (null without a price)."""
    main, st = run.main, run.settings
    return {
        "tokens": run.tokens, "steps": run.steps, "days": run.days, "wall_s": run.wall_s,
        "train_s": run.train_s, "checkpointing_s": run.checkpointing_s,
        "gpu_hours": run.gpu_hours, "energy_mwh": run.energy_mwh, "pue": st.pue,
        "board_power_w": run.board_power_w, "cost_usd": run.cost_usd,
        "usd_per_gpu_hour": st.usd_per_gpu_hour,
        "checkpoint": _ckpt_json(main) | {"storage_bytes_per_s": st.storage.bytes_per_s,
                                          "storage_per_node": st.storage.per_node},
        "failures": {"job_mtbf_s": main.job_mtbf_s, "gpu_mtbf_s": st.gpu_mtbf_s,
                     "interruptions": run.interruptions, "lost_s": run.lost_s,
                     "restart_s": main.restart_s, "relaunch_s": st.relaunch_s},
        "goodput": run.goodput,
        "phases": [_phase_json(p) for p in phases(run)],
    }


def _storage(st) -> str:
    where = "per node" if st.storage.per_node else "for the job"
    return f"{st.storage.bytes_per_s / 1e9:g} GB/s {where}"


def run_lines(run, gpu_name: str) -> list[str]:
    """The whole-run block of ``estimate --tokens`` / ``--phases``."""
    main, st = run.main, run.settings
    ck, seg = main.checkpoint, main.segment
    cost = (f"; cost ${_si(run.cost_usd)} at ${st.usd_per_gpu_hour:,.2f}/GPU-hour"
            if run.cost_usd is not None else "")
    how = "--ckpt-interval" if st.ckpt_interval_steps is not None else "Daly's optimum"
    shape = (f"(seq {seg.seq_len}, {seg.global_batch:,} sequences per step)"
             if len(run.segments) == 1 else f"over {len(phases(run))} phases")
    pad = " " * 22
    sizes = sorted({s.gpus for s in run.segments})
    gpus = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}-{sizes[-1]:,}"
    lines = [
        f"  {'whole run':<20}{_si(run.tokens)} tokens in {run.steps:,} steps {shape}",
        f"    {'wall clock':<18}{run.days:,.2f} days = {run.train_s / DAY:,.2f} training + "
        f"{run.checkpointing_s / DAY:,.2f} checkpointing + {run.lost_s / DAY:,.2f} failures",
        f"    {'GPU-hours':<18}{_si(run.gpu_hours)} on {gpus} x {gpu_name}{cost}",
        f"    {'energy':<18}{run.energy_mwh:,.0f} MWh = {run.board_power_w:g} W board x "
        f"GPU-hours x PUE {st.pue:.2f}",
        f"    {'checkpoint':<18}{fmt_bytes(ck.bytes)}, {fmt_bytes(ck.bytes_per_gpu)} per GPU "
        f"({ck.layout})",
        f"{pad}write {ck.write_s:,.1f} s at {_storage(st)}, copy to host {ck.d2h_s:,.2f} s: "
        f"blocks {ck.blocking_s:,.2f} s ({ck.mode})",
        f"{pad}every {main.interval_steps:,} steps = {main.interval_s:,.0f} s ({how})",
        f"    {'failures':<18}job MTBF {main.job_mtbf_s / HOUR:,.2f} h = "
        f"{st.gpu_mtbf_s / HOUR:,.0f} GPU-hours / {main.gpus:,} GPUs: "
        f"{run.interruptions:,.1f} interruptions",
        f"{pad}each: relaunch {st.relaunch_s / 60:g} min + load {ck.load_s:,.1f} s + the "
        f"steps since the last checkpoint",
        f"    {'goodput':<18}{run.goodput:.1%} of the wall clock trains",
    ]
    if len(run.segments) > 1:
        lines += phase_lines(run)
    return lines


def phase_lines(run) -> list[str]:
    """One line per phase: tokens, steps, its sequence, batch and GPUs, days."""
    out = [f"    {'phase':<28}{'tokens':>11}{'steps':>11}{'seq':>8}{'batch':>11}{'GPUs':>7}"
           f"{'step s':>9}{'days':>8}{'goodput':>9}"]
    for p in phases(run):
        b = p["global_batch"]
        batch = f"{b[0]}-{b[-1]}" if b[0] != b[-1] else f"{b[-1]}"
        out.append(f"    {p['name'][:27] or '-':<28}{_si(p['tokens']):>11}{p['steps']:>11,}"
                   f"{p['seq_len']:>8}{batch:>11}{p['gpus']:>7,}"
                   f"{p['train_s'] / p['steps']:>9.2f}{p['wall_s'] / DAY:>8.2f}"
                   f"{p['train_s'] / p['wall_s']:>9.1%}")
    return out


def _vs(value: float, published: float) -> str:
    return f"{_si(value)} ({value / published - 1:+.1%})" if published else _si(value)


def held_lines(h) -> list[str]:
    """One published whole run against the ledger (``ledger.run.published.Held``)."""
    w, p, q = h.run, h.predicted, h.at_published_step
    steps = "; ".join(f"{label} {e:+.1%}" for label, e in h.step_errors)
    lines = [f"{w.label} ({w.source}): {len(h.phases)} phase(s), {_si(p.tokens)} tokens",
             f"  published                {w.published}",
             f"  step time vs published   {steps}"]
    for what, idx, published in ((("whole run", tuple(range(len(h.phases))), w.gpu_hours),)
                                 + w.parts if w.gpu_hours else ()):
        lines.append(f"  GPU-hours, {what + ':':<19}published {_si(published)}; ledger "
                     f"{_vs(h.gpu_hours(p, idx), published)}; at the published step "
                     f"{_vs(h.gpu_hours(q, idx), published)}")
    ck = q.main.checkpoint
    lines.append(f"  at the published step    {q.days:,.2f} days, goodput {q.goodput:.1%}, "
                 f"{q.interruptions:,.1f} interruptions; checkpoint {fmt_bytes(ck.bytes)}, "
                 f"write {ck.write_s:,.1f} s, every {q.main.interval_steps:,} steps")
    return lines


def held_table(helds) -> str:
    """The published whole runs, each beside its step-time error, then a summary."""
    out = []
    for h in helds:
        out += held_lines(h)
    out.append(f"{'run':<16}{'published':>11}{'ledger':>10}{'error':>8}{'step error':>17}"
               f"{'at published step':>19}{'error':>8}")
    for h in helds:
        w = h.run
        if not w.gpu_hours:
            continue
        errs = [e for _, e in h.step_errors]
        span = f"{min(errs):+.1%}" if len(errs) == 1 else f"{min(errs):+.0%}..{max(errs):+.0%}"
        p, q = h.predicted.gpu_hours, h.at_published_step.gpu_hours
        out.append(f"{w.label:<16}{_si(w.gpu_hours):>11}{_si(p):>10}"
                   f"{p / w.gpu_hours - 1:>+8.1%}{span:>17}{_si(q):>19}"
                   f"{q / w.gpu_hours - 1:>+8.1%}")
    return "\n".join(out)


def held_json(h) -> dict:
    w = h.run
    return {"label": w.label, "source": w.source, "gpu_hours_published": w.gpu_hours or None,
            "published": w.published,
            "step_errors": [{"row": label, "error": e} for label, e in h.step_errors],
            "parts": [{"what": what, "gpu_hours_published": g,
                       "gpu_hours": h.gpu_hours(h.predicted, idx),
                       "gpu_hours_at_published_step": h.gpu_hours(h.at_published_step, idx)}
                      for what, idx, g in w.parts],
            "run": run_json(h.predicted), "run_at_published_step": run_json(h.at_published_step)}
