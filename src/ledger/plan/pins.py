"""What a planner user fixes and compares with: pins, a baseline shape, and the families
of placements that lost to the winner (ledger.plan.search prices; this module only selects).

The grid's categorical columns are small codes into SCHEDULES and RECOMPUTES.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ledger.errors import LedgerError

SCHEDULES = ("1f1b", "gpipe", "interleaved", "zb-h1", "zb-v", "dualpipe",
             "dualpipev")  # interleaved-zb: no closed form
RECOMPUTES = ("none", "selective", "full")


@dataclass(frozen=True)
class Pins:
    """What the user fixes; None leaves an axis to the search."""

    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    dp: int | None = None
    ep: int | None = None
    vp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    schedule: str | None = None
    tp_overlap: bool | None = None
    overlap_grad_reduce: bool | None = None  # None: on where the framework lets a launch
    overlap_param_gather: bool | None = None  # turn it on (it never slows a step here)
    ep_overlap: bool | None = None
    no_full_recompute: bool = False  # per-layer CUDA graphs held (``search.graph_pins``)
    max_tp: int | None = None
    max_pp: int | None = None
    no_cp: bool = False
    no_hsdp: bool = False


@dataclass
class Baseline:
    """The best plan of a given shape (its other knobs free), against the planner's #1."""

    spec: str
    plan: object  # ledger.plan.search.Plan
    fits: bool
    rank: int | None  # 1-based among all fitting plans by step time; None if it does not fit
    vs_best: float  # its step time / #1's


BASELINE_KEYS = {"tp": "tp", "cp": "cp", "pp": "pp", "dp": "dp", "ep": "ep", "vp": "vp",
                 "zero": "zero", "mb": "micro_batch", "recompute": "recompute",
                 "schedule": "schedule"}


def parse_baseline(spec: str) -> Pins:
    """"tp=8,cp=1,pp=16,dp=128" (any of tp, cp, pp, dp, ep, vp, zero, mb, recompute,
    schedule) -> the Pins that shape fixes."""
    out = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in BASELINE_KEYS:
            raise LedgerError("baseline", f"{item!r} is not key=value with key one of "
                                          f"{', '.join(BASELINE_KEYS)}")
        name = BASELINE_KEYS[key]
        if name in ("recompute", "schedule"):
            out[name] = value
            continue
        try:
            out[name] = int(value)
        except ValueError:
            raise LedgerError("baseline", f"{key} must be an integer, got {value!r}") from None
        if out[name] < (0 if name == "zero" else 1):
            raise LedgerError("baseline", f"{key} must be positive, got {value}")
    if not out:
        raise LedgerError("baseline", f"no key=value in {spec!r}")
    return Pins(**out)


def matches(g, pins: Pins) -> np.ndarray:
    """Rows of the grid with the shape ``pins`` fixes."""
    sel = np.ones(len(g["tp"]), dtype=bool)
    for name, col in (("tp", "tp"), ("cp", "cp"), ("pp", "pp"), ("dp", "dp"), ("ep", "ep"),
                      ("vp", "vp"), ("zero", "zero"), ("micro_batch", "mb")):
        value = getattr(pins, name)
        if value is not None:
            sel &= g[col] == value
    if pins.recompute is not None:
        sel &= g["rc"] == (RECOMPUTES.index(pins.recompute) if pins.recompute in RECOMPUTES
                           else -1)
    if pins.schedule is not None:
        sel &= g["sched"] == (SCHEDULES.index(pins.schedule) if pins.schedule in SCHEDULES
                              else -1)
    return sel


def families(gpus_per_node: int) -> dict:
    """The families a losing line is written for: name -> which candidates belong."""
    return {
        "pure data parallel / FSDP (tp = pp = cp = 1)":
            lambda g: (g["tp"] == 1) & (g["pp"] == 1) & (g["cp"] == 1),
        "TP across nodes (tp > GPUs per node)": lambda g: g["tp"] > gpus_per_node,
        "no pipeline (pp = 1)": lambda g: g["pp"] == 1,
        "context parallel (cp > 1)": lambda g: g["cp"] > 1,
        "ZeRO-3 / FSDP": lambda g: g["zero"] == 3,
        "full recompute": lambda g: g["rc"] == RECOMPUTES.index("full"),
        "GPipe": lambda g: g["sched"] == SCHEDULES.index("gpipe"),
    }


def rejections(g, step, mem, fits, parts, cap, best, gpn) -> list[str]:
    out = []
    for name, pick in families(gpn).items():
        sel = pick(g)
        if not sel.any() or sel[best]:
            continue
        ok = sel & fits
        if not ok.any():
            need = mem[sel].min()
            out.append(f"{name}: does not fit (leanest needs {need / 2**30:.1f} GiB of "
                       f"{cap / 2**30:.1f} GiB)")
            continue
        i = np.flatnonzero(ok)[np.argmin(step[ok])]
        why = max(("pp_bubble", "tp_comm", "cp_comm", "ep_comm", "dp_comm", "compute"),
                  key=lambda k: parts[k][i] - parts[k][best] if k in parts else -np.inf)
        label = {"pp_bubble": "bubble", "compute": "recompute / slower compute"}.get(
            why, f"exposed {why.replace('_comm', '').upper()} communication")
        out.append(f"{name}: best {step[i]:.2f} s vs {step[best]:.2f} s, loses on {label}")
    return out
