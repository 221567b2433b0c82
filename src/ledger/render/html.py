"""One self-contained HTML page per report, estimate or plan: inline SVG charts, inline
CSS, one small inline script, nothing fetched from the network.

Plain SVG rather than a charting library: four bar charts and a time line need no
layout engine, the page must open offline with no CDN, and the SVG the ledger already
draws for pipelines (``render_timeline.svg_timeline``) drops in as it is. Every chart
has a ``viewBox`` and scales to the page's width.

Charts: memory per PP rank as stacked bars by cause against the usable capacity; where
the step time goes; bytes per axis x link; the simulated pipeline time line; for a plan
the ranked table with the baseline. The script only counts script errors and marks the
page ``data-ok="yes"`` when none fired, which the browser test reads back.
"""
from __future__ import annotations

from html import escape

from ledger.render.plan import plan_config
from ledger.render.text import MEMORY_CAUSES, config_line, fmt_bytes

COLOURS = {"state": "#4e79a7", "activations": "#f28e2b", "logits": "#e15759",
           "buffers": "#76b7b2", "overhead": "#59a14f"}
LINKS = {"nvlink": "#1f77b4", "ib": "#ff7f0e"}
TIME = "#b07aa1"  # bars of the step-time chart
MAX_BARS = 64  # PP ranks drawn; past it the first and last 32 (the ends differ most)

_SCRIPT = """<script>
(function () {
  var errors = 0;
  window.addEventListener("error", function () { errors += 1; });
  window.addEventListener("load", function () {
    var s = document.getElementById("page-status");
    s.setAttribute("data-errors", String(errors));
    if (errors === 0) { s.setAttribute("data-ok", "yes"); }
    else { s.textContent = "script errors: " + errors; }
  });
})();
</script>"""
_CSS = """<style>
body { font: 14px/1.4 Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
svg { max-width: 100%; height: auto; display: block; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: right; }
th { border-bottom: 1px solid #999; } td.l, th.l { text-align: left; }
tr.baseline { background: #fff3c4; } .note { color: #666; }
.timeline { overflow-x: auto; } .timeline svg { max-width: none; }
</style>"""


def page(title: str, blocks: list[str]) -> str:
    """The whole document."""
    body = "\n".join(blocks)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title>{_SCRIPT}{_CSS}</head><body>\n"
            f"<h1>{escape(title)}</h1><div id=\"page-status\"></div>\n{body}\n</body></html>\n")


def _svg(width: int, height: int, parts: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" '
            f'font-family="Helvetica, Arial, sans-serif" font-size="12">'
            + "".join(parts) + "</svg>")


def _drawn(ranks: list) -> list:
    return ranks if len(ranks) <= MAX_BARS else ranks[:MAX_BARS // 2] + ranks[-MAX_BARS // 2:]


def memory_chart(ranks: list, usable_bytes: float | None) -> str:
    """Stacked bars per PP rank (MemoryBreakdown records), a line at the usable HBM."""
    shown = _drawn(list(ranks))
    top = max([m.total_bytes for m in shown] + [usable_bytes or 0]) * 1.08 or 1.0
    gap, left, h = 10, 80, 260
    bar = max(8, min(60, 420 // len(shown) - gap))
    plot = max(len(shown) * (bar + gap) + gap, 440)
    width = left + plot + 190
    y = lambda b: 20 + h * (1 - b / top)  # noqa: E731
    parts = [f'<text x="4" y="{y(top / 1.08) + 4:.0f}">{fmt_bytes(top / 1.08)}</text>',
             f'<line x1="{left}" x2="{left}" y1="20" y2="{20 + h}" stroke="#999"/>']
    for i, m in enumerate(shown):
        x, base = left + gap + i * (bar + gap), 0.0
        for cause in MEMORY_CAUSES:
            b = getattr(m, f"{cause}_bytes")
            if b > 0:
                parts.append(f'<rect x="{x}" y="{y(base + b):.1f}" width="{bar}" '
                             f'height="{y(base) - y(base + b):.1f}" fill="{COLOURS[cause]}">'
                             f'<title>rank {m.rank} {cause}: {fmt_bytes(b)}'
                             + (", of it " + ", ".join(f"{escape(n)} {fmt_bytes(v)}" for n, v
                                                      in getattr(m, "named", ()))
                                if cause == "buffers" and getattr(m, "named", ()) else "")
                             + (", of it " + ", ".join(f"{escape(n)} {fmt_bytes(v)}" for n, v
                                                      in getattr(m, "context_named", ()))
                                if cause == "overhead" and getattr(m, "context_named", ())
                                else "")
                             + '</title></rect>')
            base += b
        parts.append(f'<text x="{x + bar / 2}" y="{20 + h + 14}" text-anchor="middle">'
                     f'{m.rank}</text>')
    if usable_bytes:
        parts.append(f'<line x1="{left}" x2="{left + plot}" y1="{y(usable_bytes):.1f}" '
                     f'y2="{y(usable_bytes):.1f}" stroke="#d62728" stroke-dasharray="6 3" '
                     f'stroke-width="2"/><text x="{left + plot + 6}" '
                     f'y="{y(usable_bytes) + 4:.1f}">usable {fmt_bytes(usable_bytes)}</text>')
    for k, cause in enumerate(MEMORY_CAUSES):
        parts.append(f'<rect x="{left + plot + 10}" y="{80 + 18 * k}" width="12" height="12" '
                     f'fill="{COLOURS[cause]}"/><text x="{left + plot + 28}" y="{91 + 18 * k}">'
                     f'{cause}</text>')
    hidden = len(ranks) - len(shown)
    parts.append(f'<text x="{left}" y="{20 + h + 30}">PP rank (per GPU)'
                 + (f"; {hidden:,} middle ranks not drawn" if hidden else "") + "</text>")
    return _svg(width, h + 60, parts, "memory per PP rank by cause")


def _hbars(rows: list[tuple[str, float, str, str]], label: str) -> str:
    """Horizontal bars: (name, value, value text, colour)."""
    top = max([v for _, v, _, _ in rows] + [0]) or 1.0
    left, span, row = 190, 460, 24
    parts = []
    for i, (name, v, text, colour) in enumerate(rows):
        y = 8 + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(name)}</text>'
                     f'<rect x="{left}" y="{y}" width="{max(span * v / top, 1):.1f}" '
                     f'height="{row - 6}" fill="{colour}"><title>{escape(name)}: {text}'
                     f'</title></rect><text x="{left + span * v / top + 6:.1f}" y="{y + 15}">'
                     f'{escape(text)}</text>')
    return _svg(left + span + 160, 16 + row * max(len(rows), 1), parts, label)


def time_chart(breakdown: dict[str, float], step_s: float) -> str:
    rows = [(k, s, f"{s:.3f} s ({s / step_s:.1%})", TIME)
            for k, s in sorted(breakdown.items(), key=lambda kv: -kv[1])]
    return _hbars(rows, "where the step time goes")


def comms_chart(comms) -> str:
    """Bytes per GPU per step by axis and link (Comm rows summed)."""
    sums: dict[tuple[str, str], float] = {}
    for c in comms:
        sums[(c.axis, c.link)] = sums.get((c.axis, c.link), 0.0) + c.bytes
    rows = [(f"{axis} over {link}", b, fmt_bytes(b), LINKS.get(link, "#888"))
            for (axis, link), b in sorted(sums.items(), key=lambda kv: -kv[1])]
    if not rows:
        return '<p class="note">no communication: one GPU</p>'
    return _hbars(rows, "bytes per axis and link")


def timeline(cfg) -> str:
    """The placement's schedule simulated at forward 1, backward 2 (the costs its bubble
    is priced at), drawn when it is small enough to draw."""
    from ledger.errors import LedgerError
    from ledger.pipeline import check_cells, check_drawable, simulated
    from ledger.render.timeline import svg_timeline

    if cfg.pp == 1:
        return '<p class="note">no pipeline (pp = 1)</p>'
    try:
        check_drawable(cfg.schedule, cfg.pp, cfg.num_microbatches, cfg.vp)
        sim = simulated(cfg.schedule, cfg.pp, cfg.num_microbatches, cfg.vp, group=cfg.vp_group)
        check_cells(sim)
    except LedgerError as e:
        return f'<p class="note">time line not drawn: {escape(str(e))}</p>'
    return (f'<p class="note">forward 1, backward 2 time units per stage (scroll sideways)'
            f'</p><div class="timeline">{svg_timeline(sim)}</div>')


RUN_COLOURS = {"training": "#2e7d32", "checkpointing": "#f9a825", "failure loss": "#c62828"}


def run_chart(run) -> str:
    """The run's wall-clock days as one stacked bar: training, checkpointing, failure loss."""
    days = {"training": run.train_s / 86400, "checkpointing": run.checkpointing_s / 86400,
            "failure loss": run.lost_s / 86400}
    total = sum(days.values()) or 1.0
    left, span, parts, x = 10, 640, [], 10.0
    for name, d in days.items():
        w = span * d / total
        parts.append(f'<rect x="{x:.1f}" y="10" width="{max(w, 0.5):.1f}" height="34" '
                     f'fill="{RUN_COLOURS[name]}"><title>{name}: {d:,.2f} days '
                     f'({d / total:.1%})</title></rect>')
        x += w
    for k, (name, d) in enumerate(days.items()):
        parts.append(f'<rect x="{left + 220 * k}" y="56" width="12" height="12" '
                     f'fill="{RUN_COLOURS[name]}"/><text x="{left + 220 * k + 18}" y="67">'
                     f'{name} {d:,.2f} d ({d / total:.1%})</text>')
    return _svg(left + span + 20, 80, parts, "wall-clock days of the run by cause")


def run_table(run, gpu_name: str) -> str:
    """GPU-hours, cost, energy, goodput, checkpoint and failures, as the text block says."""
    from ledger.render.run import run_lines

    text = "\n".join(run_lines(run, gpu_name))
    return f'<pre class="run">{escape(text)}</pre>'


def exposed_table(rows) -> str:
    """Axis, call, seconds exposed of seconds issued, and why it is not hidden."""
    if not rows:
        return '<p class="note">no communication is exposed</p>'
    head = ("<tr><th class=l>axis</th><th class=l>call</th><th>exposed</th><th>issued</th>"
            "<th class=l>why it is not hidden</th></tr>")
    body = "".join(f"<tr><td class=l>{escape(r.axis)}</td><td class=l>{escape(r.call)}</td>"
                   f"<td>{r.exposed_s:.3f} s</td><td>{r.issued_s:.3f} s</td>"
                   f"<td class=l>{escape(r.why)}</td></tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def _section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>\n{body}\n</section>"


def placement_page(model, cfg, pl, usable_bytes=None, est=None, system=None, run=None) -> str:
    """report (pl) and estimate (pl and est): memory, time, bytes, pipeline; with a whole
    ``run`` (``ledger.run``), its days by cause, cost, energy and goodput beside the step."""
    head = config_line(model, cfg) + (f" on {system.gpu.name}" if system else "")
    blocks = [f"<p>{escape(head)}</p>"]
    if est is not None:
        blocks.append(f"<p>step time {est.step_time_s:.3f} s, MFU {est.mfu:.1%}, "
                      f"{est.tokens_per_s_per_gpu:,.0f} tokens/s/GPU</p>")
    ranks = pl.memory_by_rank or ()
    blocks.append(_section("Memory per PP rank", memory_chart(list(ranks), usable_bytes)))
    if est is not None:
        blocks.append(_section("Where the step time goes",
                               time_chart(est.breakdown, est.step_time_s)))
        blocks.append(_section("Where exposed communication comes from",
                               exposed_table(est.exposed)))
    if run is not None:
        gpu = system.gpu.name if system is not None else "GPU"
        blocks.append(_section("The whole run: wall-clock days by cause", run_chart(run)
                               + run_table(run, gpu)))
    blocks.append(_section("Bytes per GPU per step, by axis and link", comms_chart(pl.comms)))
    blocks.append(_section(f"Pipeline time line ({cfg.schedule})", timeline(cfg)))
    return page(f"train-ledger: {model.name}", blocks)


def plan_table(result) -> str:
    head = ("<tr><th>#</th><th>step</th><th>MFU</th><th>memory</th><th class=l>dominant</th>"
            "<th class=l>placement</th></tr>")
    rows = [f"<tr><td>{i}</td><td>{p.step_time_s:.2f} s</td><td>{p.mfu:.1%}</td>"
            f"<td>{fmt_bytes(p.memory_bytes)}</td><td class=l>{escape(p.dominant)}</td>"
            f"<td class=l>{escape(plan_config(p.config))}</td></tr>"
            for i, p in enumerate(result.plans, 1)]
    b = result.baseline
    if b is not None and b.plan is not None:
        rank = f"#{b.rank}" if b.rank else "does not fit"
        p = b.plan
        rows.append(f'<tr class="baseline"><td>{rank}</td><td>{p.step_time_s:.2f} s</td>'
                    f"<td>{p.mfu:.1%}</td><td>{fmt_bytes(p.memory_bytes)}</td>"
                    f"<td class=l>baseline {escape(b.spec)}</td><td class=l>"
                    f"{escape(plan_config(p.config))} ({b.vs_best:.2f}x #1)</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def plan_page(model, gpus, system, result, best_pl=None, best_est=None, run=None) -> str:
    """The ranked table (and baseline), then #1 charted as an estimate is (and its whole
    ``run`` when the plan was ranked by time to train)."""
    blocks = [f"<p>{escape(model.name)} on {gpus} x {escape(system.gpu.name)}: "
              f"{result.evaluated:,} placements, {result.fitting:,} fit</p>",
              _section("Ranked placements", plan_table(result))]
    if best_pl is not None:
        cfg = result.plans[0].config
        usable = best_est.memory_capacity_bytes if best_est is not None else None
        blocks += [_section("#1: memory per PP rank",
                            memory_chart(list(best_pl.memory_by_rank or ()), usable)),
                   _section("#1: where the step time goes",
                            time_chart(best_est.breakdown, best_est.step_time_s)),
                   _section("#1: where exposed communication comes from",
                            exposed_table(best_est.exposed)),
                   *([_section("#1: the whole run, wall-clock days by cause",
                               run_chart(run) + run_table(run, system.gpu.name))]
                     if run is not None else []),
                   _section("#1: bytes per GPU per step", comms_chart(best_pl.comms)),
                   _section(f"#1: pipeline time line ({cfg.schedule})", timeline(cfg))]
    return page(f"train-ledger plan: {model.name}", blocks)
