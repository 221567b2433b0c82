"""benchmarks/fit.py stages 3, 4 and 5 iterated to their fixed point.

Each stage fits its constants with the others held (``ledger.render.bridge_fit``): stage 3
the host's five, stage 4 the Blackwell GEMM share with the grouped GEMM share and Blackwell
Ultra's rate, stage 5 a Grace host's scale. Stages 3 and 5 run as one search (``joint``):
stage 3's whole grid at every Grace scale of stage 5's - the host's seconds and a Grace
host's scale over them trade off along flat valleys, and a fit that moved one with the
other held ended where it started from (rounds from the constants shipped before found
one fixed point, from elsewhere others). A round runs stages 3 and 5 together, then stage
4 holding them, from the shipped constants, until a round changes nothing: that round's
constants are a fixed point (each search, run again at them, returns them first).

A search's argmin on the edge of its grid's axis is not bracketed; the declared rule
(``beyond``) adds one point past that edge, one step of the axis's outermost spacing away
and no further than the axis's physical bound (``BOUNDS``: no host seconds below 0, no
GEMM share above the peak), and the search runs again, until its argmin is bracketed on
every axis (or sits on a bound) or ``MAX_EXTENSIONS`` points were added in one search
(then the axes still on an edge are named). Points added stay on the grid for the later
rounds: the grids only grow. The iteration stops after ``MAX_ROUNDS`` rounds (said so) or
when a round's constants are those of an earlier round but the last (a cycle: its rounds
are named)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.render.bridge_fit import (BLACKWELL_SHARE_GRID, GRACE_HOST_GRID, GROUPED_SHARE_GRID,
                                     HOST_AXES, HOST_GRID, ULTRA_RATE_GRID, blackwell_shares,
                                     fit_host, fit_share)

SHARE_AXES = ("blackwell_share", "grouped_gemm_share", "ultra_rate")
GRACE_AXES = ("grace_host_scale",)
# each axis's physical bounds (low, high; None: none): host seconds are not negative; a
# sustained GEMM share is a share of the datasheet peak (at most 1), the grouped GEMMs'
# rate at most the dense rate (DeepGEMM's grouped kernels reach its dense rate, README @
# 4cc65afa: Calibration.grouped_gemm_share); Blackwell Ultra's rate and a Grace host's
# scale are ratios of two positive figures
BOUNDS = {"host": ((0.0, None),) * len(HOST_AXES),
          "share": ((0.0, 1.0), (0.0, 1.0), (0.0, None)),
          "grace": ((0.0, None),)}
MAX_EXTENSIONS = 8  # points one stage run may add past its edges
MAX_ROUNDS = 10


@dataclass(frozen=True)
class Constants:
    """The constants stages 3, 4 and 5 fit: the host's five (HOST_AXES order, seconds),
    the Blackwell share, the grouped GEMM share, Blackwell Ultra's rate, Grace's scale."""

    host: tuple
    share: float
    grouped: float
    ultra: float
    grace: float

    def cal(self):
        from ledger.step import DEFAULT

        return replace(DEFAULT, **dict(zip(HOST_AXES, self.host)),
                       grouped_gemm_share=self.grouped, grace_host_scale=self.grace)

    def shares(self) -> dict:
        return blackwell_shares(self.share, self.ultra)

    def named(self) -> dict:
        return (dict(zip(HOST_AXES, self.host))
                | dict(zip(SHARE_AXES, (self.share, self.grouped, self.ultra)))
                | {"grace_host_scale": self.grace})


def shipped() -> Constants:
    """What ships: ledger.step.DEFAULT, ledger.system.chips.BLACKWELL_SHARE and ULTRA_RATE."""
    from ledger.step import DEFAULT
    from ledger.system.chips import BLACKWELL_SHARE, ULTRA_RATE

    return Constants(tuple(getattr(DEFAULT, n) for n in HOST_AXES), BLACKWELL_SHARE,
                     DEFAULT.grouped_gemm_share, ULTRA_RATE, DEFAULT.grace_host_scale)


def declared_grids() -> dict:
    """The stages' grids as ledger.render.bridge_fit declares them."""
    return {"host": HOST_GRID, "share": (BLACKWELL_SHARE_GRID, GROUPED_SHARE_GRID,
                                         ULTRA_RATE_GRID),
            "grace": (GRACE_HOST_GRID,)}


def beyond(axis: tuple, value: float, bounds: tuple) -> float | None:
    """The point the rule adds to ``axis`` for an argmin at ``value``: one step of the
    axis's outermost spacing past the edge ``value`` is on, capped at ``bounds`` (low,
    high); None where ``value`` is inside the axis or on a bound."""
    pts, (lo, hi) = sorted(axis), bounds
    if len(pts) < 2:
        return None
    if value == pts[-1] and (hi is None or value < hi):
        new = value + (pts[-1] - pts[-2])
        new = new if hi is None else min(new, hi)
    elif value == pts[0] and (lo is None or value > lo):
        new = value - (pts[1] - pts[0])
        new = new if lo is None else max(new, lo)
    else:
        return None
    return round(new, 12)  # the grid's decimal step, not its float residue


def _with(axis: tuple, new: float) -> tuple:
    """``axis`` with ``new`` in it, in the axis's declared order (ascending or not)."""
    return tuple(sorted(set(axis) | {new}, reverse=len(axis) > 1 and axis[0] > axis[-1]))


@dataclass(frozen=True)
class Stage:
    """One stage run: its ranking on its final grids (best first: mean |error|, max
    |error|, the point), the grids, the points added past an edge ((axis, value), in
    order) and the axes still on an edge when MAX_EXTENSIONS was reached."""

    ranking: list
    grids: tuple
    added: tuple
    edges: tuple

    @property
    def best(self) -> tuple:
        return self.ranking[0][2:]


def search(rank, grids: tuple, bounds: tuple, names: tuple) -> Stage:
    """``rank(grids)`` (a ranking, best first) with the edge rule: while the argmin sits on
    an axis's edge that ``beyond`` may extend, add that point and rank again."""
    ranking, added = rank(grids), []
    for _ in range(MAX_EXTENSIONS + 1):
        grown = [(i, p) for i, (axis, v, b) in enumerate(zip(grids, ranking[0][2:], bounds))
                 if (p := beyond(axis, v, b)) is not None]
        if not grown or len(added) >= MAX_EXTENSIONS:
            return Stage(ranking, grids, tuple(added), tuple(names[i] for i, _ in grown))
        for i, p in grown:
            grids = grids[:i] + (_with(grids[i], p),) + grids[i + 1:]
            added.append((names[i], p))
        ranking = rank(grids)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Round:
    """One round: its three stages, the constants after it, which of them it changed, and
    ``end``: None while the iteration goes on, else why it stopped ("fixed point",
    "cycle" - ``cycle`` the rounds whose constants repeat - or "cap")."""

    number: int
    host: Stage
    share: Stage
    grace: Stage
    constants: Constants
    changed: tuple
    end: str | None = None
    cycle: tuple = ()


def joint(c: Constants, grids: dict) -> tuple[Stage, Stage]:
    """Stages 3 and 5 as one search at ``c``'s stage 4: stage 3's grid at every Grace scale
    of stage 5's, the edge rule on all six axes; returned as stage 3's Stage (its ranking
    at the best scale) and stage 5's (each scale's best, best first)."""
    names, bounds = HOST_AXES + GRACE_AXES, BOUNDS["host"] + BOUNDS["grace"]

    def rank(g):
        out = []
        for scale in g[-1]:
            at = replace(c, grace=scale)
            out += [(*e, scale) for e in fit_host(g[:-1], cal=at.cal(), shares=at.shares())]
        return sorted(out)

    both = search(rank, (*grids["host"], *grids["grace"]), bounds, names)
    n = len(HOST_AXES)
    best = both.best[n]
    host = Stage([e[:-1] for e in both.ranking if e[-1] == best], both.grids[:n],
                 tuple(a for a in both.added if a[0] in HOST_AXES),
                 tuple(e for e in both.edges if e in HOST_AXES))
    firsts = {}
    for e in both.ranking:  # best first: each scale's first entry is its best
        firsts.setdefault(e[-1], (e[0], e[1], e[-1]))
    grace = Stage(sorted(firsts.values()), both.grids[n:],
                  tuple(a for a in both.added if a[0] in GRACE_AXES),
                  tuple(e for e in both.edges if e in GRACE_AXES))
    return host, grace


def rounds(start: Constants | None = None, grids: dict | None = None,
           max_rounds: int = MAX_ROUNDS):
    """Yield each round of stages 3 and 5 together, then 4, from ``start`` (default the
    shipped) on ``grids`` (default the declared), the last one with its ``end``."""
    c, grids = start or shipped(), dict(grids or declared_grids())
    seen = [c]
    for n in range(1, max_rounds + 1):
        host, grace = joint(c, grids)
        c35 = replace(c, host=host.best, grace=grace.best[0])
        share = search(lambda g: fit_share(*g, cal=c35.cal()), grids["share"],
                       BOUNDS["share"], SHARE_AXES)
        new = replace(c35, share=share.best[0], grouped=share.best[1], ultra=share.best[2])
        grids = {"host": host.grids, "share": share.grids, "grace": grace.grids}
        changed = tuple(k for k, v in new.named().items() if c.named()[k] != v)
        end, cycle = None, ()
        if not changed:
            end = "fixed point"
        elif new in seen[:-1]:
            end, cycle = "cycle", tuple(range(seen.index(new), n + 1))
        elif n == max_rounds:
            end = "cap"
        yield Round(n, host, share, grace, new, changed, end, cycle)
        if end:
            return
        seen.append(new)
        c = new
