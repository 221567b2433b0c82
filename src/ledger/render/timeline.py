"""Pictures of a simulated pipeline: a terminal time line and an SVG.

One row per rank, one cell per action, its width its duration. Without colour the
kinds stay apart by letter and fill: forward ``F3..``, backward ``B3==`` (the input
half of a split backward is ``B`` too, the weight half ``W3--``); DualPipe's overlapped
pair of one micro-batch's forward and another's backward ``F3B1##``; a superscript names
the stage when a rank holds several (the forward's, for a pair); ``.`` is idle.
"""
from __future__ import annotations

from fractions import Fraction
from functools import reduce
from html import escape
from math import gcd

SUPER = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
FILL = {"F": ".", "B": "=", "I": "=", "W": "-", "FB": "#"}
LETTER = {"F": "F", "B": "B", "I": "B", "W": "W", "FB": "F"}


def _name(a) -> str:
    """F3, B3, W3, or an overlapped pair F3B1."""
    return LETTER[a.kind] + str(a.mb) + (f"B{a.mb2}" if a.kind == "FB" else "")


def label(t, v: int) -> str:
    a = t.action
    return _name(a) + (str(a.stage).translate(SUPER) if v > 1 else "")


def _ansi(mb: int, kind: str) -> str:
    """Background colour per micro-batch; backward a darker shade of the same hue."""
    palette = (45, 214, 120, 177, 81, 209, 150, 219, 39, 228)
    shade = palette[mb % len(palette)]
    return f"\x1b[48;5;{shade}m\x1b[30m" + ("\x1b[1m" if kind != "F" else "")


def text_timeline(sim, colour: bool = False, max_width: int = 200) -> str:
    """The time line in characters, on a grid fine enough that every action starts and
    ends on a character and the shortest one has room for its label."""
    v, rows = sim.schedule.v, sim.timeline
    unit = min(t.end - t.start for row in rows for t in row)  # times in shortest actions
    times = [Fraction(x / unit).limit_denominator(64) for row in rows for t in row
             for x in (t.start, t.end)]
    quantum = Fraction(reduce(gcd, (q.numerator for q in times if q)),
                       reduce(lambda a, b: a * b // gcd(a, b), (q.denominator for q in times)))
    shortest = min(Fraction((t.end - t.start) / unit).limit_denominator(64)
                   for r in rows for t in r)
    longest_label = max(len(label(t, v)) for row in rows for t in row)
    chars = max(1, -(-longest_label * quantum // shortest))  # per quantum
    chars = min(chars, max(1, int(max_width * quantum / Fraction(sim.makespan / unit)
                                  .limit_denominator(64))))
    col = lambda x: int(Fraction(x / unit).limit_denominator(64) / quantum * chars)  # noqa: E731
    lines = []
    for r, row in enumerate(rows):
        out, cursor = [], 0
        for t in row:
            start, end = col(t.start), col(t.end)
            out.append("." * (start - cursor))
            text = label(t, v)[: max(end - start, 1)]
            cell = text + FILL[t.action.kind] * (end - start - len(text))
            out.append(_ansi(t.action.mb, t.action.kind) + cell + "\x1b[0m" if colour else cell)
            cursor = max(end, start + len(text))
        out.append("." * max(col(sim.makespan) - cursor, 0))
        lines.append(f"rank {r:<3} " + "".join(out))
    return "\n".join(lines)


def summary(sim) -> str:
    s = sim.schedule
    peaks = ", ".join(f"{p:g}" for p in sim.peak_inflight)
    return (f"{s.name}: pp={s.pp} microbatches={s.m} stages/rank={s.v}  makespan "
            f"{sim.makespan:g}  bubble {sim.bubble_fraction:.4f}  peak in-flight micro-batches "
            f"per rank [{peaks}]")


def _hsl(mb: int, kind: str) -> str:
    hue = (mb * 47) % 360
    light = {"F": 78, "B": 52, "I": 52, "W": 66, "FB": 62}[kind]
    return f"hsl({hue},65%,{light}%)"


def svg_timeline(sim, cell_px: float = 30.0, row_px: int = 30) -> str:
    """A standalone SVG of the time line; stage numbers as superscripts, like the seed.
    The shortest action gets ``cell_px`` pixels, room for its label."""
    v, pad, head = sim.schedule.v, 70, 28
    shortest = min(t.end - t.start for row in sim.timeline for t in row)
    unit_px = cell_px * (1.25 if v > 1 else 1.0) / shortest
    width = max(pad + sim.makespan * unit_px + 20, 7 * len(summary(sim)) + pad)
    height = head + row_px * len(sim.timeline) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
             f'height="{height}" viewBox="0 0 {width:.0f} {height}" '
             f'font-family="Helvetica, Arial, sans-serif" font-size="12">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{pad}" y="18" font-size="13">{escape(summary(sim))}</text>']
    for r, row in enumerate(sim.timeline):
        y = head + r * row_px
        parts.append(f'<text x="8" y="{y + row_px / 2 + 4}">rank {r}</text>')
        parts.append(f'<rect x="{pad}" y="{y}" width="{sim.makespan * unit_px:.1f}" '
                     f'height="{row_px - 4}" fill="#f3f3f3"/>')
        for t in row:
            x, w = pad + t.start * unit_px, (t.end - t.start) * unit_px
            a = t.action
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_px - 4}" '
                         f'fill="{_hsl(a.mb, a.kind)}" stroke="#333" stroke-width="0.6">'
                         f'<title>{_name(a)} stage {a.stage} '
                         f'[{t.start:g}, {t.end:g})</title></rect>')
            sup = f'<tspan dy="-5" font-size="8">{a.stage}</tspan>' if v > 1 else ""
            parts.append(f'<text x="{x + w / 2:.1f}" y="{y + row_px / 2 + 2}" '
                         f'text-anchor="middle">{_name(a)}{sup}</text>')
    y = head + row_px * len(sim.timeline) + 22
    parts.append(f'<text x="{pad}" y="{y}">F forward (light) · B backward (dark) · '
                 f'W weight gradient (mid) · FxBy an overlapped pair · colour = micro-batch '
                 f'· grey = idle</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def timeline_json(sim) -> dict:
    return {
        "schedule": sim.schedule.name, "pp": sim.schedule.pp,
        "num_microbatches": sim.schedule.m, "vp": sim.schedule.v,
        "makespan": sim.makespan, "bubble_fraction": sim.bubble_fraction,
        "busy": sim.busy, "idle": sim.idle, "peak_inflight": sim.peak_inflight,
        "timeline": [[{"kind": t.action.kind, "mb": t.action.mb, "stage": t.action.stage,
                       "start": t.start, "end": t.end}
                      | ({"mb2": t.action.mb2, "stage2": t.action.stage2}
                         if t.action.kind == "FB" else {}) for t in row]
                     for row in sim.timeline],
    }
