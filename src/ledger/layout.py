"""Rank <-> coordinates, process groups, and which link each group crosses.

Megatron's RankGenerator orders the axes "tp-cp-ep-dp-pp": tp varies fastest (its
ranks are neighbours, inside one node) and pp slowest (its ranks are farthest
apart). Expert parallelism is carved out of the dp x cp ranks: in Megatron's expert
view (cp = 1, expert tp = tp) an EP group is ``ep`` ranks spaced ``tp`` apart, and the
expert-data-parallel group is what is left of dp x cp.

>>> lay = Layout(tp=4, dp=2, pp=2, gpus_per_node=8)
>>> lay.groups("tp")[:2], lay.groups("dp")[:2], lay.groups("pp")[:2]
([[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 4], [1, 5]], [[0, 8], [1, 9]])
>>> lay.link("tp"), lay.link("dp"), lay.link("pp")
('nvlink', 'nvlink', 'ib')
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from ledger.errors import LedgerError, require_positive

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
AXES = ("tp", "cp", "ep", "dp", "pp")
# groups beyond the five axes: gradient replicas (dp x cp), expert data parallel,
# and the two halves of an HSDP data-parallel group
GROUPS = AXES + ("dp_cp", "edp", "shard", "replicate")


def intra_node(stride, size, world, gpus_per_node):
    """Do all groups of ``size`` ranks spaced ``stride`` apart stay inside one node? The
    groups tile the world in blocks of stride*size ranks, and a group crosses a node
    exactly when a node boundary falls strictly inside its block. Numbers or arrays."""
    return (size == 1) | (gpus_per_node % (stride * size) == 0) | (world <= gpus_per_node)


@dataclass(frozen=True)
class Layout:
    """The placement of a tp x cp x dp x pp world on nodes of ``gpus_per_node``."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1
    hsdp_shard: int | None = None
    order: str = DEFAULT_ORDER
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        for f in ("tp", "cp", "dp", "pp", "ep", "gpus_per_node"):
            if not hasattr(getattr(self, f), "shape"):  # arrays: the planner's valid grid
                require_positive(f, getattr(self, f))
        axes = self.order.split("-")
        if sorted(axes) != sorted(AXES):
            raise LedgerError("order", f"must be a '-'-joined permutation of {', '.join(AXES)},"
                                       f" got {self.order!r}")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def _dense_strides(self) -> dict[str, int]:
        """Stride of each dense axis: the product of the axes that vary faster."""
        strides, step = {}, 1
        for axis in self.order.split("-"):
            if axis == "ep":
                continue
            strides[axis] = step
            step = step * getattr(self, axis)  # not *=: with arrays it would alias
        return strides

    def span(self, group: str) -> tuple[int, int] | None:
        """(stride, size) of ``group`` when its ranks are evenly spaced, else None."""
        st = self._dense_strides()
        n = self.dp * self.cp
        if group in ("tp", "cp", "dp", "pp"):
            return st[group], getattr(self, group)
        dense = [a for a in self.order.split("-") if a != "ep"]
        lo, hi = sorted(("cp", "dp"), key=dense.index)
        if dense.index(hi) == dense.index(lo) + 1:  # adjacent: one evenly spaced block
            joined, base = True, st[lo]
        else:  # only when one of them is 1 (numbers only: the planner uses the default)
            n_lo, n_hi = getattr(self, lo), getattr(self, hi)
            joined, base = n_lo == 1 or n_hi == 1, st[hi] if n_lo == 1 else st[lo]
        if group == "dp_cp":
            return (base, n) if joined else None
        if group in ("ep", "edp"):  # expert view: cp folds into data parallel
            if not joined:
                return None
            return (base, self.ep) if group == "ep" else (base * self.ep, n // self.ep)
        shard = n if self.hsdp_shard is None else self.hsdp_shard
        if group in ("shard", "replicate"):
            if not joined:
                return None
            return (base, shard) if group == "shard" else (base * shard, n // shard)
        raise LedgerError("group", f"unknown group {group!r}; known: {', '.join(GROUPS)}")

    def groups(self, group: str) -> list[list[int]]:
        """Every process group of ``group``, as sorted rank lists (by brute force)."""
        return list(self.iter_groups(group))

    def group_size(self, group: str) -> int:
        """Ranks in one group of ``group``; there are world / group_size of them."""
        return len(self._members(group))

    def iter_groups(self, group: str):
        """The groups of ``group`` one at a time, lowest rank first: listing the first few
        costs only them, whatever the world size."""
        members = self._members(group)
        seen: set[int] = set()
        for r in range(self.world):
            if r in seen:
                continue
            g = sorted(r + m for m in members)
            seen.update(g)
            yield g

    def _members(self, group: str) -> list[int]:
        """Offsets of a group's ranks from its lowest rank."""
        st = self._dense_strides()
        span = self.span(group)
        if span is None:  # cp and dp are not adjacent in the order: enumerate
            members = [a * st["cp"] + b * st["dp"] for a, b in product(range(self.cp),
                                                                        range(self.dp))]
            if group != "dp_cp":
                raise LedgerError("order", f"group {group} needs cp and dp adjacent in "
                                           f"{self.order!r}")
        else:
            stride, size = span
            members = [k * stride for k in range(size)]
        return members

    def link(self, group: str) -> str:
        """'nvlink' when every group of ``group`` stays inside one node, else 'ib'."""
        span = self.span(group)
        if span is None:
            gpn = self.gpus_per_node
            same = all(len({r // gpn for r in g}) == 1 for g in self.groups(group))
            return "nvlink" if same else "ib"
        intra = intra_node(*span, self.world, self.gpus_per_node)
        if getattr(intra, "ndim", 0):  # a grid of layouts (the planner)
            return np.where(intra, "nvlink", "ib")
        return "nvlink" if intra else "ib"

    def coords(self, rank: int) -> dict[str, int]:
        """The dense coordinates of ``rank``."""
        if not 0 <= rank < self.world:
            raise LedgerError("rank", f"rank({rank}) outside world({self.world})")
        return {a: (rank // s) % getattr(self, a) for a, s in self._dense_strides().items()}
