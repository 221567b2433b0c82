"""CPU offload in the planner: the kinds a fine-tune's candidate may run, what stays on
its GPU, what its node's host holds, and the seconds its step waits for - the rules of
``ledger.placement.offload`` over the grid's arrays."""
from __future__ import annotations

import numpy as np

from ledger.config import OFFLOADS
from ledger.memory import StateBytes
from ledger.placement import dp_collective_counts
from ledger.placement import offload as offloading


def choices(fw, zero: int, finetune, replicas: int) -> list[int]:
    """Offload kinds (indices of OFFLOADS) a candidate at ZeRO stage ``zero`` over
    ``replicas`` data-parallel ranks may run: none, and with a fine-tune those the framework
    offers at that stage (``Framework.offloads``). On one replica a ZeRO stage means
    nothing but the offload it carries - ZeRO-Offload's own case, 13 B parameters on one
    V100 (Ren et al. 2021, ZeRO-Offload, sec. 1), FSDP2's CPUOffloadPolicy on a one-GPU
    mesh - so there it comes with one."""
    if finetune is None or fw is None:
        return [0] if zero == 0 or replicas > 1 else []
    offered = [OFFLOADS.index(k) for k in fw.offloads if zero in fw.offload_stage[k]]
    return ([0] if zero == 0 or replicas > 1 else []) + offered


FIELDS = ("params_bytes", "grads_bytes", "optim_bytes")


def grid_offload(codes, st: StateBytes, trained):
    """For the rows of one layout (``codes``: each row's offload kind; ``st``, ``trained``:
    per row and PP rank, the sharded state and the trainable partition of a GPU): the
    state each rank keeps in HBM (``offload.on_gpu``), the most host memory a GPU needs
    (``offload.host_bytes``), and the heaviest rank's state and partition (the GPU the
    step waits for)."""
    codes = np.asarray(codes)
    shape = np.broadcast(*(getattr(st, f) for f in FIELDS), np.asarray(trained),
                         codes[:, None]).shape
    full = [np.broadcast_to(getattr(st, f), shape) for f in FIELDS]
    trained = np.broadcast_to(trained, shape)
    kept, host = [np.zeros(shape) for _ in FIELDS], np.zeros(shape)
    for code in np.flatnonzero(np.bincount(codes)):  # the kinds present (no np.unique:
        # numpy 2.4 imports numpy.ma there)
        rows, kind = codes == code, OFFLOADS[code]
        part = StateBytes(*(a[rows] for a in full))
        for out, value in zip(kept, (getattr(offloading.on_gpu(part, kind), f) for f in FIELDS)):
            out[rows] = value
        host[rows] = offloading.host_bytes(part, trained[rows], kind)
    heaviest, rows = sum(full).argmax(axis=1), np.arange(shape[0])
    return (StateBytes(*kept), host.max(axis=1),
            StateBytes(*(a[rows, heaviest] for a in full)), trained[rows, heaviest])


def step_s(cfg, code: int, st: StateBytes, trained, node: int, system):
    """(exposed host-link seconds, overlapped ones, CPU optimizer seconds) on ``system``
    of one group's rows, offload kind ``code``, ``st`` and ``trained`` those of each row's
    heaviest GPU."""
    kind = OFFLOADS[code]
    if kind == "none":
        return 0.0, 0.0, 0.0
    reduces, gathers = dp_collective_counts(cfg)
    exposed, overlapped = offloading.split_bytes(st, trained, kind, reduces, gathers,
                                                 cfg.num_microbatches, cfg.zero_stage)
    link = system.host_bandwidth()
    return (exposed / link, overlapped / link,
            offloading.cpu_step_s(trained * node, system.cpu_optimizer_params_per_s))
