"""Count what reaches the c10d dispatcher: every collective PyTorch runs, whoever calls it.

A TorchDispatchMode sees the c10d ops that ``torch.distributed`` lowers to (FSDP2's
all-gathers and reduce-scatters, DDP's all-reduces, pipelining's sends) and the
functional collectives DTensor uses, so the three strategies are measured the same way.
Per op: the collective, its group size, the payload in the ledger's convention, and the
bytes one rank sends for it in the ring model.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from ledger.collectives import coll_bytes

# op name -> (collective, which argument holds the payload, does the payload count the group)
_C10D = {
    "allreduce_": ("all_reduce", 0, False),
    "_allgather_base_": ("all_gather", 0, False),
    "allgather_into_tensor_coalesced_": ("all_gather", 0, False),
    "_reduce_scatter_base_": ("reduce_scatter", 1, False),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1, False),
    "alltoall_base_": ("all_to_all", 1, False),
    "send": ("send_recv", 0, False),
}
_FUNCTIONAL = {  # _c10d_functional ops: payload argument, output is the gathered size
    "all_reduce": ("all_reduce", 0),
    "all_gather_into_tensor": ("all_gather", 0),
    "reduce_scatter_tensor": ("reduce_scatter", 0),
    "all_to_all_single": ("all_to_all", 0),
}


@dataclass
class Record:
    kind: str
    n: int
    payload: float
    ring: float
    tag: str


def _bytes(x) -> int:
    if isinstance(x, (list, tuple)):
        return sum(_bytes(t) for t in x)
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _group_size(args) -> int:
    for a in args:
        if type(a).__name__ == "ScriptObject":
            try:
                return dist.ProcessGroup.unbox(a).size()
            except RuntimeError:
                continue
    return dist.get_world_size()


class CollectiveMeter(TorchDispatchMode):
    """``with CollectiveMeter() as m: ...`` then ``m.records``; ``m.tag`` labels calls."""

    def __init__(self):
        super().__init__()
        self.records: list[Record] = []
        self.tag = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ns, name = func.namespace, func.__name__.split(".")[0]
        if ns == "c10d" and name in _C10D:
            kind, arg, _ = _C10D[name]
            n = _group_size(args)
            payload = _bytes(args[arg])
            if kind == "all_gather" and name == "_allgather_base_":
                payload = _bytes(args[0])  # the gathered output
            self._add(kind, n, payload)
        elif ns == "_c10d_functional" and name in _FUNCTIONAL:
            kind, arg = _FUNCTIONAL[name]
            group = args[-1]
            n = dist.distributed_c10d._resolve_process_group(group).size()
            payload = _bytes(args[arg]) * (n if kind == "all_gather" else 1)
            self._add(kind, n, payload)
        return func(*args, **kwargs)

    def _add(self, kind: str, n: int, payload: float) -> None:
        self.records.append(Record(kind, n, payload, coll_bytes(kind, n, payload), self.tag))

    def total(self, kind: str | None = None, tag: str | None = None) -> float:
        return sum(r.ring for r in self.records
                   if (kind is None or r.kind == kind) and (tag is None or r.tag == tag))
