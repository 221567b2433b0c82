"""The memory validation as text: every measured peak against the ledger's, in the
source's own definition (``ledger.validation.memory``), and the fit of the allocator's
fragmentation and of its unreturnable part. benchmarks/memory.py and
benchmarks/fit_memory.py print these; docs/memory.md shows them and tests/test_memory.py
holds the page to them."""
from __future__ import annotations

from ledger.render.text import fmt_bytes

_SHORT = {"pytorch/torchtitan@d4c86e37": "torchtitan 2024-12", "pytorch/torchtitan@cbccb387":
          "torchtitan 2025-06", "NVIDIA/Megatron-LM@d98e8a64": "Megatron-LM",
          "pytorch/torchtitan@395a5262": "torchtitan 2024-04",
          "pytorch/torchtitan@3faaa1a0": "torchtitan 2024-08",
          "DeepSeek-V3 technical report": "DeepSeek-V3 report",
          "NVIDIA Megatron Core MoE report": "MCore MoE report"}


def source_name(row) -> str:
    return next((v for k, v in _SHORT.items() if row.source.startswith(k)), row.source)


def _gib(b: float) -> str:
    return f"{b / 2**30:8.2f}"


def _row(row, placed) -> str:
    from ledger.validation.memory import error, predicted

    ranks = placed.memory_by_rank
    key = {"reserved": "reserved_bytes", "max-alloc": "allocated_bytes"}.get(row.metric)
    top = max(ranks, key=lambda m: getattr(m, key)) if key else ranks[-1]
    where = f"{top.moment}, rank {top.rank}" if top.moment else ""
    head = f"{row.role[:5]:<5} {source_name(row):<18} {row.label:<44} {row.metric:<9}"
    if row.metric == "outcome":
        device = max(m.required_bytes for m in ranks)  # what the verdict weighs
        verdict = "fits" if predicted(row) else "OOM"
        right = "right" if error(row) == 0 else "WRONG"
        return (f"{head} {'ran' if row.measured else 'OOM':>8} {verdict:>8} {right:>7}  "
                f"{fmt_bytes(device)} on {row.gpu}")
    return (f"{head} {_gib(row.measured)} {_gib(predicted(row))} {error(row):+7.1%}  "
            f"{where}")


def _summary(role: str, what: str, errs: list[float]) -> str:
    return (f"{role:<5} {what:<18} mean |error| {sum(errs) / len(errs):5.1%}   max "
            f"{max(errs):5.1%}   ({len(errs)} rows)")


def memory_table(rows=None) -> str:
    """One line per row (GiB = 2^30 B), then mean and max |error| per source and role, and
    the verdicts right."""
    from ledger.validation.memory import _placed, error, peaks

    rows = peaks() if rows is None else rows
    lines = [f"{'set':<5} {'source':<18} {'run':<44} {'metric':<9} {'measured':>8} "
             f"{'ledger':>8} {'error':>7}  the ledger's peak"]
    lines += [_row(r, _placed(r)) for r in rows]
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.metric != "outcome":
            groups.setdefault((r.role, source_name(r)), []).append(abs(error(r)))
    for role in ("calibration", "prediction", "chosen"):
        every = []
        for (rl, src), errs in groups.items():
            if rl == role:
                every += errs
                lines.append(_summary(role[:5], src, errs))
        if every:
            lines.append(_summary(role[:5], "all measured", every))
    # a reading chosen with its priced figure in view is in no summary but its own
    lines.append(_summary("all", "measured rows", [e for (rl, _), v in groups.items()
                                                   for e in v if rl != "chosen"]))
    signed = [error(r) for r in rows if r.metric != "outcome" and r.role != "chosen"]
    if signed:
        lines.append(f"{'all':<5} {'signed mean':<18} {sum(signed) / len(signed):+.1%}   "
                     f"(under on {sum(e < 0 for e in signed)} of {len(signed)} rows)")
    outcomes = [r for r in rows if r.metric == "outcome"]
    right = sum(error(r) == 0 for r in outcomes)
    bound = sum(r.role == "bound" for r in outcomes)
    lines.append(f"{'all':<5} {'fit verdicts':<18} {right} of {len(outcomes)} right "
                 f"({sum(r.measured == 1 for r in outcomes)} ran, "
                 f"{sum(r.measured == 0 for r in outcomes)} out of memory; {bound} of them "
                 f"bounding the unreturnable share: calibration, not prediction)")
    return "\n".join(lines)


def fit_table(fits: dict, top: int = 3) -> str:
    """The fragmentation fit's best grid points on each basis (``fits``: basis -> the
    scores ``fit_fragmentation`` returns), then what ships."""
    from ledger.frameworks.conventions import FRAGMENTATION
    from ledger.validation.memory import calibration_rows

    rows = calibration_rows()
    lines = [f"fragmentation (reserved / allocated - 1) on {len(rows)} calibration rows "
             f"({sum(not r.cfg.compile for r in rows)} eager, "
             f"{sum(bool(r.cfg.compile) for r in rows)} compiled)"]
    for basis, scores in fits.items():
        label = {"allocated+pool": "allocated bytes, FSDP2's all-gather stream pool "
                                   "cached"}.get(basis, f"{basis} bytes")
        lines.append(f"a share of {label}:")
        for mean, worst, eager, compiled in scores[:top]:
            lines.append(f"  eager {eager:4.2f}  compiled {compiled:4.2f}  mean |error| "
                         f"{mean:.2%}  max {worst:.2%}")
    lines.append(f"shipped: a share of allocated bytes, eager {FRAGMENTATION[0]:4.2f}  "
                 f"compiled {FRAGMENTATION[1]:4.2f}")
    return "\n".join(lines)


def unreturnable_table(items) -> str:
    """The unreturnable share's fit on the outcome rows (``items``: (label, ran, critical
    share), ``ledger.validation.outcomes.share_bounds``), then what ships."""
    from ledger.frameworks.conventions import UNRETURNABLE
    from ledger.validation.outcomes import fit_unreturnable, share_bounds

    (lo, lo_row), (hi, hi_row), wrong = share_bounds(items)
    n_ran = sum(ran for _, ran, _ in items)
    lines = [f"unreturnable share (split blocks kept through a failed cudaMalloc, of allocated) "
             f"on {len(items)} outcome rows ({n_ran} ran, {len(items) - n_ran} out of memory)",
             f"  above {lo:.2%}: {lo_row or 'no out-of-memory row binds'}",
             f"  at most {hi:.2%}: {hi_row or 'no run that ran binds'}",
             f"  rows no share judges right: {', '.join(wrong) if wrong else 'none'}",
             f"fitted (the midpoint, to 0.1%): {fit_unreturnable(items):.3f}",
             f"shipped: {UNRETURNABLE:.3f}"]
    return "\n".join(lines)
