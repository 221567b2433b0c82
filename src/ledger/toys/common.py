"""What every toy shares: the run context, the report it returns, and the byte meters.

The call meter wraps the torch.distributed entry points for the duration of a toy, so
the toys call ``dist.all_reduce`` and friends in plain sight and every byte they hand
to a collective is still counted: per call, the payload (the tensor), the bytes one
rank sends for it in the ring model (``ledger.placement.collectives.coll_bytes``), and what
gloo's own algorithm writes for it with its message counts (``ledger.toys.gloo``).
The wire meter (``ledger.toys.wire``) reads from the kernel what this rank's sockets
wrote inside each ``ctx.metering(tag)`` block; less gloo's measured framing for the
calls' messages, that is the wire figure each toy holds to the ledger.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

from ledger.placement import coll_bytes
from ledger.toys import gloo, wire
from ledger.toys.catalog import SPAWN_BASELINE

WIRE_TOLERANCE = 0.01
# gloo's wire bytes / the ring's for the same payload (ledger.toys.gloo says why)
GLOO_VS_RING = {"reduce_scatter": 2.0}


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
    wire: list[float] | None = None  # per rank: kernel bytes less gloo's framing
    wire_expected: list[float] | None = None  # the ledger's, or gloo's where it differs

    @property
    def exact(self) -> bool:
        return all(abs(a - b) < 1e-9 for a, b in zip(self.measured, self.predicted))

    @property
    def wire_ok(self) -> bool:
        if self.wire is None or self.wire_expected is None:
            return False
        return all(abs(w - e) <= WIRE_TOLERANCE * e + 1e-9
                   for w, e in zip(self.wire, self.wire_expected))


@dataclass
class ToyReport:
    name: str
    lines: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    bytes: list[ByteRow] = field(default_factory=list)
    values: dict = field(default_factory=dict)
    framing: dict | None = None  # gloo's framing as measured in this world (wire.Framing)

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
    traffic: gloo.Traffic = gloo.NONE
    wire: int | None = None  # kernel bytes of this call (blocking collectives only)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Meter:
    """Counts what this rank hands to collectives while ``active`` is set."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.tag = ""
        self.active = False
        self.kernel: dict[str, int] = {}  # tag -> bytes the sockets wrote in its blocks
        self.framing: wire.Framing | None = None
        self._saved: dict[str, object] = {}

    def _record(self, kind: str, group, payload: float, off_rank: float | None = None,
                traffic: gloo.Traffic | None = None):
        if not self.active:
            return
        n = dist.get_world_size(group)
        ring = coll_bytes(kind, n, payload) if kind != "recv" else 0.0
        self.calls.append(Call(kind, n, payload, ring, ring if off_rank is None else off_rank,
                               self.tag, traffic or gloo.NONE))

    def wire(self, tag: str) -> float | None:
        """Kernel bytes of ``tag``'s blocks less gloo's framing for their messages (None
        off gloo: NCCL's bytes go over NVLink / IB, which no TCP counter sees)."""
        if self.framing is None:
            return None
        t = gloo.NONE
        for c in self.calls:
            if c.tag == tag:
                t = t + c.traffic
        return self.kernel.get(tag, 0) - self.framing.of(t.sends, t.recvs)

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
            "send", "isend", "recv", "irecv")}

        def me(group):
            return dist.get_rank(group)
        self._saved = orig

        def all_reduce(tensor, *a, group=None, **k):
            n = dist.get_world_size(group)
            m._record("all_reduce", group, _nbytes(tensor), traffic=gloo.all_reduce(
                n, me(group), _nbytes(tensor), tensor.element_size()))
            return orig["all_reduce"](tensor, *a, group=group, **k)

        def reduce_scatter_single(output, input, *a, group=None, **k):
            n = dist.get_world_size(group)
            m._record("reduce_scatter", group, _nbytes(input), traffic=gloo.reduce_scatter(
                n, me(group), _nbytes(input), input.element_size()))
            return orig["reduce_scatter_single"](output, input, *a, group=group, **k)

        def all_gather_single(output, input, *a, group=None, **k):
            m._record("all_gather", group, _nbytes(output), traffic=gloo.all_gather(
                dist.get_world_size(group), _nbytes(output)))
            return orig["all_gather_single"](output, input, *a, group=group, **k)

        def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                              group=None, **k):
            n = dist.get_world_size(group)
            rows = input.shape[0]
            splits = input_split_sizes or [rows // n] * n
            me = dist.get_rank(group)
            row_bytes = _nbytes(input) / rows if rows else 0
            m._record("all_to_all", group, _nbytes(input),
                      (rows - splits[me]) * row_bytes,
                      gloo.all_to_all(n, me, [int(c * row_bytes) for c in splits]))
            before = wire.snapshot() if m.active else None
            out = orig["all_to_all_single"](output, input, output_split_sizes,
                                            input_split_sizes, group=group, **k)
            if before is not None:  # blocking: this call's own kernel bytes
                m.calls[-1].wire = wire.delta(before, wire.snapshot())
            return out

        def send(tensor, dst=None, group=None, *a, **k):
            m._record("send_recv", group, _nbytes(tensor), traffic=gloo.send(_nbytes(tensor)))
            return orig["send"](tensor, dst, group, *a, **k)

        def isend(tensor, dst=None, group=None, *a, **k):
            m._record("send_recv", group, _nbytes(tensor), traffic=gloo.send(_nbytes(tensor)))
            return orig["isend"](tensor, dst, group, *a, **k)

        def recv(tensor, src=None, group=None, *a, **k):
            m._record("recv", group, 0, traffic=gloo.recv())
            return orig["recv"](tensor, src, group, *a, **k)

        def irecv(tensor, src=None, group=None, *a, **k):
            m._record("recv", group, 0, traffic=gloo.recv())
            return orig["irecv"](tensor, src, group, *a, **k)

        for name, fn in (("all_reduce", all_reduce),
                         ("reduce_scatter_single", reduce_scatter_single),
                         ("all_gather_single", all_gather_single),
                         ("all_to_all_single", all_to_all_single), ("send", send),
                         ("isend", isend), ("recv", recv), ("irecv", irecv)):
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
        before = wire.snapshot()
        try:
            yield
        finally:
            got = wire.delta(before, wire.snapshot())
            self.meter.kernel[tag] = self.meter.kernel.get(tag, 0) + got
            self.meter.active = False

    def wire(self, tag: str) -> float:
        return self.meter.wire(tag)

    def t(self, data, **kw) -> torch.Tensor:
        """A fresh tensor on this rank's device (made on the CPU first, so seeds agree;
        always a copy, so marking it requires_grad never touches the source)."""
        return torch.as_tensor(data, **kw).to(self.device, copy=True)


def fmt_list(xs, spec: str = ".1f") -> str:
    return "[" + ", ".join(format(float(x), spec) for x in xs) + "]"


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().cpu() - b.detach().cpu()).abs().max())


def handed_check(rep: "ToyReport", row: ByteRow) -> None:
    """The bytes handed to the collective (sizes and call counts) against the ledger's."""
    rep.check(f"{row.collective}: bytes handed to the collectives = the ledger's",
              row.exact)


def wire_row(rep: "ToyReport", row: ByteRow, wire_per_rank: list[float], kind: str,
             gloo_figure: list[float] | None = None) -> None:
    """Fill ``row``'s wire column and add its check: within WIRE_TOLERANCE of the
    ledger's figure, or of gloo's own where its algorithm is not the ring (or, given,
    ``gloo_figure``: gloo's bytes for the real, uneven splits)."""
    if any(w is None for w in wire_per_rank):
        row.note = (row.note + "; " if row.note else "") + "wire not measured (not gloo)"
        return
    factor = GLOO_VS_RING.get(kind, 1.0)
    row.wire = list(wire_per_rank)
    row.wire_expected = gloo_figure or [p * factor for p in row.predicted]
    what = ("gloo's figure over the real splits" if gloo_figure else "ledger" if factor == 1.0
            else f"gloo's figure ({factor:g} x the ledger's)")
    worst = max((abs(w / e - 1) if e else float(w != 0))
                for w, e in zip(row.wire, row.wire_expected))
    rep.check(f"{row.collective}: wire bytes from the kernel = {what} "
              f"(within {WIRE_TOLERANCE:.0%})", row.wire_ok, f"worst rank off by {worst:.2%}")


class ToyJob:
    """A toy as a launcher job: one call meter per process, installed once."""

    _meter: Meter | None = None

    def __init__(self, name: str):
        from importlib import import_module

        self.name = name
        self.module = import_module(f"ledger.toys.{name}") if name != SPAWN_BASELINE else None

    def run(self, rank):
        if self.module is None:  # the launch floor: one all-reduce
            dist.all_reduce(torch.ones(1, device=rank.device))
            return None
        if ToyJob._meter is None:
            ToyJob._meter = Meter()
            ToyJob._meter.install()  # pipelining also checks that dist.isend is the real one
            if rank.backend == "gloo":  # the kernel sees gloo's TCP sockets only
                ToyJob._meter.framing = wire.measure_framing(rank.rank)
        rep = self.module.run(Ctx(rank.rank, rank.world, rank.device, ToyJob._meter))
        if rep is not None and ToyJob._meter.framing is not None:
            rep.framing = asdict(ToyJob._meter.framing)
        return rep
