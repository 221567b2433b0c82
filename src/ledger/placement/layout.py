"""Rank <-> coordinates, process groups, and which link each group crosses.

Megatron's RankGenerator orders the axes "tp-cp-ep-dp-pp": tp varies fastest (its
ranks are neighbours, inside one node) and pp slowest (its ranks are farthest
apart). The experts live on a second grid over the same ranks (Megatron-Core
parallel_state.py L874-907): expert TP (``etp``, default tp), EP and expert data
parallel (EDP) with cp = 1, in the same order, so ETP x EP x EDP = TP x CP x DP within
one PP stage and the PP groups of both grids coincide. At etp = tp an EP group is
``ep`` ranks spaced ``tp`` apart; at etp = 1, EP folds into the TP ranks too.

Which link a group crosses is decided by the *scale-up domain* (the GPUs one NVLink fabric
joins), not the host: a group that stays inside one domain rides NVLink, one that spans
domains the NICs. A job fills its domains in equal *segments* of whole hosts, as Megatron-
Bridge's launcher asks Slurm for them on 4-GPU-host NVL72 racks (scripts/performance/utils/
executors.py L168-177 @ 067f987d: ``--segment`` = the job's hosts when they fit one rack of
18, else the largest divisor of them up to 18): 256 GB200s are 64 hosts in 4 segments of 16,
64 GPUs of each rack.

>>> lay = Layout(tp=4, dp=2, pp=2, gpus_per_node=8)
>>> lay.groups("tp")[:2], lay.groups("dp")[:2], lay.groups("pp")[:2]
([[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 4], [1, 5]], [[0, 8], [1, 9]])
>>> lay.link("tp"), lay.link("dp"), lay.link("pp")
('nvlink', 'nvlink', 'ib')
>>> rack = Layout(ep=64, dp=64, pp=4, gpus_per_node=4, gpus_per_domain=72)
>>> rack.domain, rack.link("ep"), rack.link("pp")
(64, 'nvlink', 'ib')
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from ledger.config import expert_tp
from ledger.errors import LedgerError, require_positive

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
AXES = ("tp", "cp", "ep", "dp", "pp")
# groups beyond the five axes: gradient replicas (dp x cp), expert data parallel,
# and the two halves of an HSDP data-parallel group
GROUPS = AXES + ("dp_cp", "edp", "etp", "etp_ep", "shard", "replicate")
EXPERT_GROUPS = ("ep", "edp", "etp", "etp_ep")


def expert_dp(cfg):
    """Expert data parallel size: the ranks of one PP stage over ETP x EP,
    tp cp dp / (etp ep) (parallel_state.py L874-880)."""
    return cfg.tp * cfg.cp * cfg.dp // (expert_tp(cfg) * cfg.ep)


def intra_node(stride, size, world, gpus_per_node):
    """Do all groups of ``size`` ranks spaced ``stride`` apart stay inside one domain of
    ``gpus_per_node`` GPUs? The groups tile the world in blocks of stride*size ranks, and
    a group crosses a domain exactly when a domain boundary falls strictly inside its
    block. Numbers or arrays."""
    return (size == 1) | (gpus_per_node % (stride * size) == 0) | (world <= gpus_per_node)


def segment(world, gpus_per_host: int, gpus_per_domain: int):
    """GPUs of each scale-up domain a job of ``world`` GPUs fills: whole hosts, the job's
    hosts when they fit one domain, else the largest divisor of them that does (Megatron-
    Bridge's Slurm ``--segment``, module docstring). Numbers or arrays.

    >>> segment(256, 4, 72), segment(288, 4, 72), segment(64, 4, 72), segment(16, 8, 8)
    (64, 72, 64, 8)
    """
    per = gpus_per_domain // gpus_per_host
    if per <= 1:
        return gpus_per_host
    hosts = -(-np.asarray(world) // gpus_per_host)
    seg = np.zeros_like(hosts)
    for k in range(per, 0, -1):
        seg = np.where((seg == 0) & (hosts % k == 0), k, seg)
    out = seg * gpus_per_host
    return out if out.shape else int(out)


@dataclass(frozen=True)
class Layout:
    """The placement of a tp x cp x dp x pp world on hosts of ``gpus_per_node`` GPUs in
    scale-up domains of ``gpus_per_domain`` (default: one host)."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1
    hsdp_shard: int | None = None
    order: str = DEFAULT_ORDER
    gpus_per_node: int = 8
    etp: int | None = None  # expert tensor parallel; None: tp (Megatron's default)
    gpus_per_domain: int | None = None  # the NVLink domain; None: one host

    def __post_init__(self) -> None:
        for f in ("tp", "cp", "dp", "pp", "ep", "gpus_per_node"):
            if not hasattr(getattr(self, f), "shape"):  # arrays: the planner's valid grid
                require_positive(f, getattr(self, f))
        if self.gpus_per_domain is not None:
            require_positive("gpus_per_domain", self.gpus_per_domain)
            if self.gpus_per_domain % self.gpus_per_node:
                raise LedgerError("gpus_per_domain", f"a domain is whole hosts: gpus_per_"
                                                     f"domain({self.gpus_per_domain}) is not a "
                                                     f"multiple of gpus_per_node("
                                                     f"{self.gpus_per_node})")
        axes = self.order.split("-")
        if sorted(axes) != sorted(AXES):
            raise LedgerError("order", f"must be a '-'-joined permutation of {', '.join(AXES)},"
                                       f" got {self.order!r}")
        if not hasattr(self.tp * self.ep, "shape") and (self.ep > 1 or expert_tp(self)
                                                        != self.tp):
            self._check_expert_grid()

    def _check_expert_grid(self) -> None:
        """ETP x EP must tile one PP stage, and both grids must share their PP groups
        (Megatron-Core parallel_state.py L874-880, L904-907)."""
        etp = expert_tp(self)
        require_positive("etp", etp)
        stage = self.tp * self.cp * self.dp
        if stage % (etp * self.ep):
            raise LedgerError("etp", f"etp({etp}) * ep({self.ep}) does not divide tp({self.tp})"
                                     f" * cp({self.cp}) * dp({self.dp}) = {stage}")
        if self._expert_strides()["pp"] != self._dense_strides()["pp"]:
            raise LedgerError("order", f"{self.order!r}: the expert grid's pp groups differ "
                                       f"from the dense grid's (etp {etp}, tp {self.tp})")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def domain(self):
        """GPUs of one scale-up domain this job fills (``segment``): the unit inside
        which a group rides NVLink (numbers or arrays)."""
        return segment(self.world, self.gpus_per_node,
                       self.gpus_per_domain or self.gpus_per_node)

    def _dense_strides(self) -> dict[str, int]:
        """Stride of each dense axis: the product of the axes that vary faster."""
        strides, step = {}, 1
        for axis in self.order.split("-"):
            if axis == "ep":
                continue
            strides[axis] = step
            step = step * getattr(self, axis)  # not *=: with arrays it would alias
        return strides

    def _expert_sizes(self) -> dict:
        return {"tp": expert_tp(self), "cp": 1, "ep": self.ep, "dp": expert_dp(self),
                "pp": self.pp}

    def _expert_strides(self) -> dict:
        """Strides on Megatron's expert grid: the same order, tp -> etp, cp -> 1,
        dp -> EDP (parallel_state.py L886-896)."""
        strides, step, sizes = {}, 1, self._expert_sizes()
        for axis in self.order.split("-"):
            strides[axis] = step
            step = step * sizes[axis]
        return strides

    def span(self, group: str) -> tuple[int, int] | None:
        """(stride, size) of ``group`` when its ranks are evenly spaced, else None."""
        st = self._dense_strides()
        n = self.dp * self.cp
        if group in ("tp", "cp", "dp", "pp"):
            return st[group], getattr(self, group)
        if group in EXPERT_GROUPS:  # Megatron's expert grid: 'ep', 'dp', 'tp', 'tp-ep'
            es, size = self._expert_strides(), self._expert_sizes()
            if group == "etp_ep":
                lo, hi = sorted(("tp", "ep"), key=self.order.split("-").index)
                if np.any(es[hi] != es[lo] * size[lo]):  # not adjacent in the order
                    return None
                return es[lo], size["tp"] * size["ep"]
            axis = {"ep": "ep", "edp": "dp", "etp": "tp"}[group]
            return es[axis], size[axis]
        dense = [a for a in self.order.split("-") if a != "ep"]
        lo, hi = sorted(("cp", "dp"), key=dense.index)
        if dense.index(hi) == dense.index(lo) + 1:  # adjacent: one evenly spaced block
            joined, base = True, st[lo]
        else:  # only when one of them is 1 (numbers only: the planner uses the default)
            n_lo, n_hi = getattr(self, lo), getattr(self, hi)
            joined, base = n_lo == 1 or n_hi == 1, st[hi] if n_lo == 1 else st[lo]
        if group == "dp_cp":
            return (base, n) if joined else None
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
                raise LedgerError("order", f"group {group} needs its axes adjacent in "
                                           f"{self.order!r}")
        else:
            stride, size = span
            members = [k * stride for k in range(size)]
        return members

    def link(self, group: str) -> str:
        """'nvlink' when every group of ``group`` stays inside one scale-up domain, else
        'ib' (the NICs)."""
        span = self.span(group)
        if span is None:
            gpn = self.domain
            same = all(len({r // gpn for r in g}) == 1 for g in self.groups(group))
            return "nvlink" if same else "ib"
        intra = intra_node(*span, self.world, self.domain)
        if getattr(intra, "ndim", 0):  # a grid of layouts (the planner)
            return np.where(intra, "nvlink", "ib")
        return "nvlink" if intra else "ib"

    def per_node(self, group: str):
        """Ranks of one ``group`` that share a scale-up domain (NCCL's node: under MNNVL
        its topology spans the NVLink clique, src/graph/topo.cc L1887-1891 @ 5067397c):
        domain // stride, between 1 and the group's size (evenly spaced groups; numbers
        or arrays)."""
        span = self.span(group)
        if span is None:
            raise LedgerError("order", f"group {group} needs its axes adjacent in "
                                       f"{self.order!r}")
        stride, size = span
        dom = self.domain
        if getattr(size, "ndim", 0) or getattr(dom, "ndim", 0):
            return np.clip(dom // stride, 1, size)
        return max(1, min(size, dom // stride))

    def coords(self, rank: int) -> dict[str, int]:
        """The dense coordinates of ``rank``."""
        if not 0 <= rank < self.world:
            raise LedgerError("rank", f"rank({rank}) outside world({self.world})")
        return {a: (rank // s) % getattr(self, a) for a, s in self._dense_strides().items()}
