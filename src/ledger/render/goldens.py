"""Megatron-LM's functional-test goldens against the ledger, as text
(``ledger.validation.megatron_goldens``, priced by ``ledger.cli.goldens``): every priced row,
every golden left out with why, counted, and the summary by family, platform and feature.
benchmarks/megatron_goldens.py prints it."""
from __future__ import annotations

from collections import Counter

from ledger.validation.megatron_goldens import summary

GIB = 2**30


def _row(p) -> str:
    g = p.golden
    name = f"{g.family}/{g.case}"
    return (f"{name:<86} {g.platform:<12} {p.metric:<9} {p.measured / GIB:8.3f} "
            f"{p.ledger / GIB:8.3f} {p.error:+7.1%} {'~' if p.approximate else ''}")


def _reason(why: str) -> str:
    """A reason's kind, for the count: its text up to the first colon (a reader refusal:
    its first reason)."""
    if "numbers would mean nothing: " in why:
        why = "reader: " + why.split("numbers would mean nothing: ", 1)[1]
    return why.split(" (")[0].split(";")[0][:100]


def summary_lines(rows, title: str) -> list[str]:
    s = summary(rows)
    order = ["all"] + sorted(k for k in s if k != "all")
    return [f"{title:<9} {k:<34} mean |error| {s[k][0]:6.1%}  signed {s[k][1]:+7.1%}  "
            f"max {s[k][2]:6.1%}  ({s[k][3]} rows)" for k in order]


def counts(goldens, priced, left) -> list[str]:
    cases = {(g.family, g.case) for g in goldens}
    taken = [g for g in goldens if not g.skip]
    read = {(p.golden.family, p.golden.case, p.golden.platform) for p in priced}
    named = sum(any(x.startswith("named ") for x in p.groups) for p in priced)
    return [f"{len(goldens)} golden files of {len(cases)} cases log memory; the rule takes "
            f"{len(taken)} ({len({(g.family, g.case) for g in taken})} cases); read and "
            f"priced: {len(read)} ({len({(f, c) for f, c, _ in read})} cases), "
            f"{len(priced)} rows, {sum(p.approximate for p in priced)} marked approximate "
            f"({named} for what the case sets, the rest for the harness's NCCL environment)"]


def goldens_table(goldens, priced, left) -> str:
    lines = [f"{'case':<86} {'platform':<12} {'metric':<9} {'measured':>8} {'ledger':>8} "
             f"{'error':>7}  (GiB = 2^30 B; ~ approximate: the launch sets what the "
             f"ledger does not model)"]
    lines += [_row(p) for p in priced]
    lines.append("")
    lines.append("left out (the rule's reasons, then the reader's):")
    for why, n in Counter(_reason(w) for _, w in left).most_common():
        lines.append(f"{n:5d}  {why}")
    for g, why in left:
        if not g.skip:
            lines.append(f"       {g.family}/{g.case} {g.platform}: {why}")
    from ledger.validation.megatron_goldens import unread

    for path, why in unread():  # the tool's: files it could not read at all
        lines.append(f"    -  {path}: {why}")
    lines.append("")
    lines += counts(goldens, priced, left)
    for metric, title in (("allocated", "max-alloc"), ("resident", "after")):
        mine = [p for p in priced if p.metric == metric]
        if mine:
            lines += summary_lines(mine, title)
    return "\n".join(lines)


__all__ = ["counts", "goldens_table", "summary_lines"]
