"""What every toy shares: the run context, the report it returns, and the byte meter.

The meter wraps the torch.distributed entry points for the duration of a toy, so
the toys call ``dist.all_reduce`` and friends in plain sight and every byte they hand
to a collective is still counted: per call, the payload (the tensor) and the bytes
one rank sends for it in the ring model (``ledger.collectives.coll_bytes``).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ledger.collectives import coll_bytes


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class ByteRow:
    """Measured against predicted bytes for one collective of one toy, per rank."""

    collective: str
    measured: list[float]  # per rank
    predicted: list[float]  # per rank, from the ledger's placement formulas
    note: str = ""

    @property
    def exact(self) -> bool:
        return all(abs(a - b) < 1e-9 for a, b in zip(self.measured, self.predicted))


@dataclass
class ToyReport:
    name: str
    lines: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    bytes: list[ByteRow] = field(default_factory=list)
    values: dict = field(default_factory=dict)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append(Check(name, bool(ok), detail))

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass
class Call:
    kind: str  # all_reduce | reduce_scatter | all_gather | all_to_all | send_recv
    n: int  # group size
    payload: float  # bytes, in the coll_bytes convention
    ring: float  # bytes this rank sends in the ring model
    off_rank: float  # bytes that leave this rank (all_to_all: by the real splits)
    tag: str = ""


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Meter:
    """Counts what this rank hands to collectives while ``active`` is set."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.tag = ""
        self.active = False
        self._saved: dict[str, object] = {}

    def _record(self, kind: str, group, payload: float, off_rank: float | None = None):
        if not self.active:
            return
        n = dist.get_world_size(group)
        ring = coll_bytes(kind, n, payload)
        self.calls.append(Call(kind, n, payload, ring, ring if off_rank is None else off_rank,
                               self.tag))

    def total(self, kind: str, tag: str | None = None, field_: str = "ring") -> float:
        return sum(getattr(c, field_) for c in self.calls
                   if c.kind == kind and (tag is None or c.tag == tag))

    def install(self) -> None:
        """Wrap the dist entry points the toys use (idempotent)."""
        if self._saved:
            return
        m = self
        orig = {name: getattr(dist, name) for name in (
            "all_reduce", "reduce_scatter_single", "all_gather_single", "all_to_all_single",
            "send", "isend")}
        self._saved = orig

        def all_reduce(tensor, *a, group=None, **k):
            m._record("all_reduce", group, _nbytes(tensor))
            return orig["all_reduce"](tensor, *a, group=group, **k)

        def reduce_scatter_single(output, input, *a, group=None, **k):
            m._record("reduce_scatter", group, _nbytes(input))
            return orig["reduce_scatter_single"](output, input, *a, group=group, **k)

        def all_gather_single(output, input, *a, group=None, **k):
            m._record("all_gather", group, _nbytes(output))
            return orig["all_gather_single"](output, input, *a, group=group, **k)

        def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                              group=None, **k):
            n = dist.get_world_size(group)
            rows = input.shape[0]
            splits = input_split_sizes or [rows // n] * n
            me = dist.get_rank(group)
            row_bytes = _nbytes(input) / rows if rows else 0
            m._record("all_to_all", group, _nbytes(input),
                      (rows - splits[me]) * row_bytes)
            return orig["all_to_all_single"](output, input, output_split_sizes,
                                             input_split_sizes, group=group, **k)

        def send(tensor, dst=None, group=None, *a, **k):
            m._record("send_recv", group, _nbytes(tensor))
            return orig["send"](tensor, dst, group, *a, **k)

        def isend(tensor, dst=None, group=None, *a, **k):
            m._record("send_recv", group, _nbytes(tensor))
            return orig["isend"](tensor, dst, group, *a, **k)

        for name, fn in (("all_reduce", all_reduce),
                         ("reduce_scatter_single", reduce_scatter_single),
                         ("all_gather_single", all_gather_single),
                         ("all_to_all_single", all_to_all_single), ("send", send),
                         ("isend", isend)):
            setattr(dist, name, fn)

    def uninstall(self) -> None:
        for name, fn in self._saved.items():
            setattr(dist, name, fn)
        self._saved = {}


@dataclass
class Ctx:
    """One rank's view of the launched world."""

    rank: int
    world: int
    device: torch.device
    meter: Meter

    def gather(self, obj) -> list | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere); not metered."""
        was, self.meter.active = self.meter.active, False
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        self.meter.active = was
        return out if self.rank == 0 else None

    @contextlib.contextmanager
    def metering(self, tag: str):
        self.meter.tag, self.meter.active = tag, True
        try:
            yield
        finally:
            self.meter.active = False

    def t(self, data, **kw) -> torch.Tensor:
        """A fresh tensor on this rank's device (made on the CPU first, so seeds agree;
        always a copy, so marking it requires_grad never touches the source)."""
        return torch.as_tensor(data, **kw).to(self.device, copy=True)


def fmt_list(xs, spec: str = ".1f") -> str:
    return "[" + ", ".join(format(float(x), spec) for x in xs) + "]"


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().cpu() - b.detach().cpu()).abs().max())
