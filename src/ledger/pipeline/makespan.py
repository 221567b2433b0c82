"""Pipeline makespans in closed form, for one placement or a grid of them (numpy arrays).

GPipe, 1F1B and interleaved 1F1B have textbook forms (Narayanan et al. 2021, sec. 2.2):
(m + (p-1)/v)(t_f + t_b) plus one p2p hop per boundary down and back up.

Split-backward schedules (ZB-H1, ZB-V; Qi et al. 2023) have no single textbook form once
the weight-gradient half W differs from the input-gradient half I - and in a real layer
it does: W is only the weight-gradient GEMMs, I is the input-gradient GEMMs plus the
attention backward, the elementwise backward and the TP collectives. Their makespan is a
max-plus expression of (t_f, t_i, t_w, p2p): the longest dependency path through the
schedule. We get that expression exactly by running the simulator's own traversal
(ledger.pipeline) symbolically - each action's finish time is the set of cost vectors
(counts of F, I, W chunks and p2p hops) of the paths that can reach it, pruned to the
undominated ones - on the two smallest pipelines and micro-batch counts, and use that the
makespan is bilinear in (p, m) beyond them (m >= 2p - 1 for ZB-V, m >= p for ZB-H1)
while every hop is at most half of every chunk (2 p2p <= min(t_f, t_i, t_w) / v); outside
that domain the rows are simulated one by one. tests/test_step.py holds both forms to
``ledger.pipeline.simulate`` over a grid of p, m and cost ratios.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ledger.pipeline.schedules import build
from ledger.pipeline.simulator import Costs, _deps, makespan_bounded

_KIND = {"F": 0, "I": 1, "W": 2, "B": 3, "FB": 4}
HOP = len(_KIND)  # the last entry of a cost vector counts p2p hops


def _prune(vecs: set) -> frozenset:
    """Keep the cost vectors no other vector dominates (costs are >= 0)."""
    if len(vecs) < 2:
        return frozenset(vecs)
    a = np.array(sorted(vecs))
    ge = (a[:, None, :] >= a[None, :, :]).all(axis=2)  # ge[u, v]: u dominates or equals v
    dominated = (ge & ~np.eye(len(a), dtype=bool)).any(axis=0)  # distinct rows: strict
    return frozenset(map(tuple, a[~dominated].tolist()))


@lru_cache(maxsize=64)
def forms(kind: str, p: int, m: int) -> np.ndarray:
    """The makespan of ``kind`` at (p, m) as rows (n_F, n_I, n_W, n_B, n_FB, n_hops): the
    makespan is max over rows of row . (t_f, t_i, t_w, t_b, t_fb) / visits, p2p."""
    sched = build(kind, p, m, 2 if kind in ("zb-v", "dualpipe", "dualpipev") else 1)
    done: dict = {}  # (kind, mb, stage) -> (frozenset of vectors, rank)
    pos, free = [0] * sched.pp, [frozenset({(0,) * (HOP + 1)})] * sched.pp
    remaining = sum(len(r) for r in sched.ranks)
    while remaining:
        for r, acts in enumerate(sched.ranks):
            while pos[r] < len(acts):
                a = acts[pos[r]]
                keys = [(("I" if k == "B" and ("B", mb, st) not in done else k), mb, st)
                        for k, mb, st in _deps(a, sched.chain)]
                if any(k not in done for k in keys):
                    break
                ready = set(free[r])
                for k in keys:
                    vecs, rank = done[k]
                    hop = int(rank != r)
                    ready |= {v[:HOP] + (v[HOP] + hop,) for v in vecs}
                step = [0] * (HOP + 1)
                step[_KIND[a.kind]] = 1
                end = _prune({tuple(x + y for x, y in zip(v, step)) for v in _prune(ready)})
                for part in a.parts():
                    done[(part.kind, part.mb, part.stage)] = (end, r)
                free[r], pos[r] = end, pos[r] + 1
                remaining -= 1
    return np.array(sorted(_prune(set().union(*free))), dtype=float)


def _eval(kind, p, m, x) -> np.ndarray:
    return (forms(kind, p, m) @ x).max(axis=0)


def _bases(kind: str, p: int) -> tuple[int, int]:
    """The smallest (p, m) the bilinear form is anchored at for pipelines of depth p:
    ZB-V needs m >= 2p - 1 (its built length); ZB-H1's last warm-up shape differs at
    m = p, so its general anchor is m = p + 1 and m = p is a line of its own."""
    anchor = min(p, 3)
    top = anchor + (anchor == 3)  # p >= 3 also uses p = 4, so m must suit it too
    return anchor, (2 * top - 1 if kind == "zb-v" else top + 1)


def _bilinear(kind, a, m0, pf, mf, xs, diagonal=False):
    """E(a, m0) extended to (pf, mf): linear in m for a < 3, bilinear in (p, m) beyond,
    or linear along m = p."""
    if diagonal:
        e0 = _eval(kind, a, a, xs)
        return e0 if a < 3 else e0 + (pf - a) * (_eval(kind, a + 1, a + 1, xs) - e0)
    e00, e01 = _eval(kind, a, m0, xs), _eval(kind, a, m0 + 1, xs)
    dm = e01 - e00
    if a < 3:  # p = 1 and p = 2 are their own anchors
        return e00 + (mf - m0) * dm
    e10, e11 = _eval(kind, a + 1, m0, xs), _eval(kind, a + 1, m0 + 1, xs)
    k, j = pf - a, mf - m0
    return e00 + k * (e10 - e00) + j * dm + k * j * (e11 - e10 - dm)


def split_backward_s(kind: str, p, m, t_f, t_i, t_w, p2p):
    """Makespan of ZB-H1 or ZB-V (numbers or arrays): exact in the bilinear domain,
    simulated outside it."""
    v = 2 if kind == "zb-v" else 1
    shape = np.broadcast_shapes(np.shape(p), np.shape(m), np.shape(t_f), np.shape(t_i),
                                np.shape(t_w), np.shape(p2p))
    pf = np.broadcast_to(np.asarray(p, dtype=np.int64), shape).ravel()
    mf = np.broadcast_to(np.asarray(m, dtype=np.int64), shape).ravel()
    x = np.stack([np.broadcast_to(np.asarray(a, dtype=float), shape).ravel()
                  for a in (np.divide(t_f, v), np.divide(t_i, v), np.divide(t_w, v),
                            np.zeros(shape), np.zeros(shape), p2p)])
    out = np.empty(x.shape[1])
    diag = (mf == pf) if kind == "zb-h1" else np.zeros(len(pf), dtype=bool)
    for anchor in np.unique(np.minimum(pf, 3)):
        for on_diag in (False, True):
            rows = (np.minimum(pf, 3) == anchor) & (diag == on_diag)
            if rows.any():
                a, m0 = _bases(kind, int(anchor))
                out[rows] = _bilinear(kind, a, m0, pf[rows], mf[rows], x[:, rows], on_diag)
    outside = 2 * x[HOP] > x[:3].min(axis=0) + 1e-15
    for i in np.flatnonzero(outside):  # a hop longer than a chunk: simulate the row
        costs = Costs(x[0, i] * v, (x[1, i] + x[2, i]) * v, x[1, i] * v, x[2, i] * v,
                      p2p_s=x[HOP, i])
        out[i] = makespan_bounded(kind, int(pf[i]), int(mf[i]), v, costs)
    out = out.reshape(shape)
    return out if out.shape else float(out)


def dual_s(schedule: str, p, m, t_f, t_b, t_w, t_fb, p2p):
    """Makespan of DualPipe or DualPipeV (numbers or arrays): the busiest rank's work plus
    the DeepSeek-V3 report's bubble, Table 2: (PP/2 - 1)(F&B + B - 3W) over PP stages (pp
    for DualPipe, 2 pp for DualPipeV) in chunks of F, B, W and F&B (an overlapped pair), plus
    one p2p hop per boundary down and back up. Rank 0 is the busiest, with the fewest
    pairs (ledger.pipeline.schedules): DualPipeV runs 3p - 1 forward and backward chunks
    alone and 2m - 3p + 1 pairs, DualPipe 3p/2 - 1 and m - 3p/2 + 1 (at p = 2 its middle
    ranks, 3 and m - 3). The bubble is exact
    against ``ledger.pipeline.simulate`` when W = B/2 = F and F&B = F + B, and bounds it
    from above otherwise (tests/test_schedules.py)."""
    v = visits(schedule, 2)  # chunks of a micro-batch on one rank
    f, b, w, fb = (np.divide(t, v) for t in (t_f, t_b, t_w, t_fb))
    pairs = overlap_pairs(schedule, p, m, v)
    alone = v * m - pairs
    stages = v * p
    return alone * (f + b) + pairs * fb + (stages / 2 - 1) * (fb + b - 3 * w) \
        + 2 * (p - 1) * p2p


def visits(schedule: str, v):
    """Chunks one micro-batch's share of a rank is cut into: v, or 1 under DualPipe (its
    micro-batches pass one of the rank's two stage copies)."""
    return 1 if schedule == "dualpipe" else v


def overlap_pairs(schedule: str, p, m, v):
    """Overlapped forward-backward pairs on the rank that sets the pace, in chunks:
    DualPipe's and DualPipeV's first rank (``dual_s``), or under Megatron's combined 1F1B,
    which pairs every steady step after one more warm-up forward, the last rank's
    m v - ((v - 1) p + 1) (without a pipeline m - 1): the first rank's drain runs behind
    the last rank's steady state. Their chunks are the rank's whole share over ``visits``
    (DualPipe's 1, else v)."""
    if schedule == "dualpipev":
        return 2 * m - (3 * p - 1)
    if schedule == "dualpipe":
        return m - np.maximum(1.5 * p - 1, p + 1)
    return np.maximum(m * v - ((v - 1) * p + 1), 0)


def pipeline_s(schedule: str, p, m, v, t_f, t_b, p2p, t_w=None, t_fb=None):
    """Makespan of one step's micro-batches; ``t_w`` is the weight-gradient share of
    ``t_b`` that split-backward schedules run apart (default t_b / 2), ``t_fb`` the time
    of an overlapped forward + backward pair: DualPipe's F&B (default t_f + t_b, the pair
    run one pass after the other), or under 1F1B and interleaved 1F1B Megatron's combined
    pairs (``overlap_pairs``), each shortening the first rank's steady state by
    t_f + t_b - t_fb (exact while a pair takes at least either pass alone).
    tests/test_dualpipe.py holds both to ``ledger.pipeline.simulate``."""
    t_w = t_b / 2 if t_w is None else t_w
    if schedule in ("dualpipe", "dualpipev"):
        return dual_s(schedule, p, m, t_f, t_b, t_w, t_f + t_b if t_fb is None else t_fb, p2p)
    if t_fb is not None and schedule in ("1f1b", "interleaved"):
        saved = overlap_pairs(schedule, p, m, v) * (t_f + t_b - t_fb) / v
        return pipeline_s(schedule, p, m, v, t_f, t_b, p2p, t_w) - saved
    if schedule in ("zb-h1", "zb-v"):
        return split_backward_s(schedule, p, m, t_f, t_b - t_w, t_w, p2p)
    if schedule == "interleaved-zb":
        return makespan_bounded(schedule, p, m, v,
                                Costs(t_f, t_b, t_b - t_w, t_w, p2p_s=p2p)) + 0.0
    fill = 2 * (p - 1) * p2p  # one hop per boundary on the way down and back up
    bubble = (p - 1) / (v if schedule == "interleaved" else 1)
    return (m + bubble) * (t_f + t_b) + fill


def first_backward_s(schedule: str, p, m, v, t_f, t_b):
    """When the first PP rank starts its first backward (numbers or arrays), at the
    earliest: after the forwards it runs first (ledger.pipeline.schedules: 1F1B's p - 1 warm-ups
    plus one; interleaved's (v-1) p + 2 (p-1) warm-ups plus one - (v-1) p + (p-1) with a
    split backward - capped at m v, each
    t_f / v) and after the first micro-batch's round trip (down every stage, back up
    p - 1 ranks). GPipe runs all m forwards before any backward; ZB-V's first rank
    holds the last chunk, so its first backward follows the first forward pass at once.
    ``t_b``: the backward that carries the gradient up - the input-gradient half I under
    a split backward. tests/test_step.py holds it to ledger.pipeline.simulate."""
    if schedule == "gpipe":
        return (m + p - 1) * t_f + (p - 1) * t_b
    if schedule in ("zb-v", "dualpipe", "dualpipev"):  # the first pass turns on rank 0
        return p * t_f
    if schedule in ("interleaved", "interleaved-zb"):  # the split backward warms up less
        warm = np.minimum((v - 1) * p + (1 if schedule == "interleaved-zb" else 2) * (p - 1)
                          + 1, m * v)
    else:
        warm = np.minimum(p, m)
    return np.maximum(warm * t_f / v, p * t_f + (p - 1) * t_b / v)


def pp_bubble_fraction(p: int, m: int, vp: int = 1) -> float:
    """Idle share of a GPipe / 1F1B step: (p-1) fill-and-drain slots against m useful
    ones; interleaving shrinks each slot to 1/vp.

    >>> round(pp_bubble_fraction(16, 16), 3), round(pp_bubble_fraction(4, 8), 4)
    (0.484, 0.2727)
    """
    if p <= 1:
        return 0.0
    bubble = (p - 1) / vp
    return bubble / (m + bubble)
