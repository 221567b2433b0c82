"""Count what reaches the c10d dispatcher, and read what left on the wire from the kernel.

A TorchDispatchMode sees the c10d ops that ``torch.distributed`` lowers to (FSDP2's
all-gathers and reduce-scatters, DDP's all-reduces, pipelining's sends) and the
functional collectives DTensor uses, so every strategy is measured the same way. Per
op it records the collective, its group size, the payload in the ledger's convention
(``ledger.placement.collectives``), and gloo's own traffic for it (``ledger.toys.gloo``: payload
bytes and message counts). Around every collective it snapshots this rank's TCP
sockets (``ledger.toys.wire``), waiting for the op to finish before the second
snapshot, so each op's kernel bytes are its own. Point-to-point ops are not waited
(a pipeline's receives wait on peers' later sends): their bytes are what the region
wrote outside the collectives' windows.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from ledger.toys import gloo, wire

# op name -> (collective, the argument that holds the payload in the ledger's convention)
_C10D = {
    "allreduce_": ("all_reduce", 0),
    "_allgather_base_": ("all_gather", 0),
    "allgather_into_tensor_coalesced_": ("all_gather", 0),
    "_reduce_scatter_base_": ("reduce_scatter", 1),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "alltoall_base_": ("all_to_all", 1),
    "send": ("send_recv", 0),
    "recv_": ("recv", 0),
}
_FUNCTIONAL = {"all_reduce": "all_reduce", "all_gather_into_tensor": "all_gather",
               "reduce_scatter_tensor": "reduce_scatter", "all_to_all_single": "all_to_all"}
P2P = ("send_recv", "recv")


@dataclass
class Record:
    kind: str
    n: int
    payload: float  # the ledger's convention (collectives.py)
    gloo: gloo.Traffic  # what gloo's algorithm writes on this rank
    wire: int | None  # kernel bytes in the op's window (None for point-to-point)
    tag: str


def _bytes(x) -> int:
    if isinstance(x, (list, tuple)):
        return sum(_bytes(t) for t in x)
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _elem(x) -> int:
    while isinstance(x, (list, tuple)):
        x = x[0]
    return x.element_size()


def _group(args):
    for a in args:
        if type(a).__name__ == "ScriptObject":
            try:
                return dist.ProcessGroup.unbox(a)
            except RuntimeError:
                continue
    return dist.distributed_c10d._get_default_group()


def _wait(out) -> None:
    for o in (out if isinstance(out, (list, tuple)) else (out,)):
        if type(o).__name__ == "ScriptObject":
            dist.distributed_c10d.Work.unbox(o).wait()


def _traffic(kind, n, rank, payload, elem, splits=None, rows=0) -> gloo.Traffic:
    if kind == "all_reduce":
        return gloo.all_reduce(n, rank, payload, elem)
    if kind == "reduce_scatter":
        return gloo.reduce_scatter(n, rank, payload, elem)
    if kind == "all_gather":
        return gloo.all_gather(n, payload)
    if kind == "all_to_all":
        row = payload // rows if rows else 0
        counts = list(splits) if splits else [rows // n] * n
        return gloo.all_to_all(n, rank, [c * row for c in counts])
    return gloo.send(payload) if kind == "send_recv" else gloo.recv()


class CollectiveMeter(TorchDispatchMode):
    """``with CollectiveMeter() as m: ...`` then ``m.records``; ``m.tag`` labels calls;
    ``m.region_wire`` is every byte this rank's sockets wrote inside the ``with``."""

    def __init__(self):
        super().__init__()
        self.records: list[Record] = []
        self.tag = ""
        self.region_wire = 0

    def __enter__(self):
        self._start = wire.snapshot()
        return super().__enter__()

    def __exit__(self, *exc):
        self.region_wire = wire.delta(self._start, wire.snapshot())
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ns, name = func.namespace, func.__name__.split(".")[0]
        if ns == "c10d" and name in _C10D:
            kind, arg = _C10D[name]
            pg = _group(args)
            splits, rows = None, 0
            if kind == "all_to_all":
                splits, rows = (args[4] or None), args[1].shape[0]
            return self._run(func, args, kwargs, kind, pg.size(), pg.rank(),
                             _bytes(args[arg]), _elem(args[arg]), splits, rows)
        if ns == "_c10d_functional" and name in _FUNCTIONAL:
            kind = _FUNCTIONAL[name]
            pg = dist.distributed_c10d._resolve_process_group(args[-1])
            n = pg.size()
            payload = _bytes(args[0]) * (n if kind == "all_gather" else 1)
            splits, rows = (args[2] or None, args[0].shape[0]) if kind == "all_to_all" \
                else (None, 0)
            return self._run(func, args, kwargs, kind, n, pg.rank(), payload,
                             _elem(args[0]), splits, rows, functional=True)
        return func(*args, **kwargs)

    def _run(self, func, args, kwargs, kind, n, rank, payload, elem, splits, rows,
             functional=False):
        traffic = _traffic(kind, n, rank, payload, elem, splits, rows)
        if kind in P2P:
            out = func(*args, **kwargs)
            self.records.append(Record(kind, n, payload if kind == "send_recv" else 0,
                                       traffic, None, self.tag))
            return out
        before = wire.snapshot()
        out = func(*args, **kwargs)
        if functional:
            torch.ops._c10d_functional.wait_tensor(out)
        else:
            _wait(out)
        self.records.append(Record(kind, n, payload, traffic,
                                   wire.delta(before, wire.snapshot()), self.tag))
        return out

    def payload(self, kind: str) -> float:
        """Payload handed to ``kind`` in the ledger's convention, summed."""
        return sum(r.payload for r in self.records if r.kind == kind)

    def traffic(self, kind: str) -> gloo.Traffic:
        kinds = P2P if kind == "send_recv" else (kind,)
        out = gloo.NONE
        for r in self.records:
            if r.kind in kinds:
                out = out + r.gloo
        return out

    def kernel_bytes(self, kind: str) -> int:
        """Kernel bytes of ``kind``: its ops' windows; for send_recv, what the region
        wrote outside every collective's window."""
        if kind == "send_recv":
            return self.region_wire - sum(r.wire for r in self.records if r.wire is not None)
        return sum(r.wire for r in self.records if r.kind == kind and r.wire is not None)
