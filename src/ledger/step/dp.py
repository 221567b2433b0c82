"""Data-parallel traffic in seconds, split by when it can run: layer by layer (ZeRO-3's
parameter gathers, per-micro-batch gradient reduce-scatters) or once at the step's end
(bucketed gradient reduction, ZeRO-1/2's parameter all-gather). ledger.step hides each
under the compute it can overlap; the bytes are ledger.placement.comms' DP rows, each call
priced by NCCL's cost model over its group's ranks and nodes (``ledger.step.nccl``)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ledger.frameworks import of as framework_of
from ledger.placement import dp_collective_counts
from ledger.placement.collectives import ring_payload
from ledger.step.nccl import collective_s, group_bandwidth
from ledger.system import System


def group_shape(lay, group: str, ranks):
    """(ranks per node, nodes) of one process group of ``ranks`` ranks."""
    per_node = np.minimum(lay.per_node(group), ranks)
    return per_node, np.maximum(ranks / np.maximum(per_node, 1), 1)


def nccl_system(system: System, nccl_nvls) -> System:
    """``system`` as NCCL runs on it: without NVLS where the launch sets NCCL_NVLS_ENABLE=0
    (``nccl_nvls`` False; Megatron-Bridge's launchers do, executors.py L42-43), as the memory
    side prices it (``placement.nccl_buffers.nvls_on``)."""
    if nccl_nvls is False and system.nvls:
        return replace(system, nvls=False)
    return system


def nccl_s(system: System, kind: str, wire_bytes, ranks, nodes, per_node=1):
    """Seconds of one ``kind`` call whose ranks each send ``wire_bytes``, over ``ranks``
    ranks on ``nodes`` nodes of ``system``, ``per_node`` of them on a node: NCCL's cost
    model at the group's bandwidth (``ledger.step.nccl.group_bandwidth``)."""
    eff = system.link_efficiency
    bw = group_bandwidth(system.intra_bytes_per_s * eff, system.inter_bytes_per_s * eff, nodes,
                         per_node)
    return collective_s(kind, wire_bytes, ranks, nodes, bw, system.gpu.generation, system.nvls)


def call_s(system: System, lay, row, calls):
    """Seconds of ``calls`` calls that move a DP row's bytes, by NCCL's cost model over
    the row's group (``Comm.group`` of ``Comm.ranks`` ranks) on the rank layout ``lay``."""
    per_node, nodes = group_shape(lay, row.group, row.ranks)
    return calls * nccl_s(system, row.kind, row.bytes / np.maximum(calls, 1), row.ranks, nodes,
                          per_node)


def buckets(cfg, row, replicas):
    """Gradient calls at the step's end: the launch's bucket (``dp_bucket_params``) or the
    framework's (Megatron: max(40M, 1M x dp) parameters) when the reduction overlaps the
    backward, one call per buffer when it does not and the framework then drops its
    buckets; 0 for an empty row."""
    fw = framework_of(cfg)
    fixed, per_rank = fw.dp_bucket_params
    given = getattr(cfg, "dp_bucket_params", None)  # the launch's own (--ddp-bucket-size)
    bucket = np.maximum(fixed, per_rank * replicas) if given is None else float(given)
    payload = ring_payload(row.kind, row.ranks, row.bytes)  # the buffer
    # the bucket counts parameters, whatever their dtype (Megatron's bucket_size): the
    # gradient buffer's elements at the gradients' bytes. The parameter all-gather is still
    # counted at 4 B an element (half its calls for bf16 params): counting its elements
    # moves the H100 GEMM share's fit (stage 2: 0.62 -> 0.64), a refit not yet made
    element = 4.0 if row.kind == "all_gather" else fw.grad_bytes
    split = np.ceil(payload / (element * bucket))
    one = (~np.asarray(cfg.overlap_grad_reduce, dtype=bool)) & fw.one_bucket_exposed
    return np.where(one, 1.0, split) * (row.bytes > 0)


def dp_split(rows, cfg, system: System, layers, lay):
    """((layer-wise gathers in forwards, gathers in backwards, per-micro-batch reduce-
    scatters, one such call), step-end grads, step-end params, one layer's gather)
    seconds of ledger.placement.comms' DP rows. Layer by layer: ZeRO-3's parameter gathers - in
    the forwards, and half of them in the backwards when parameters are resharded after
    forward - and the reduce-scatters (and HSDP replica all-reduces) a framework runs
    after every micro-batch's backward;
    ``comms.dp_collective_counts`` says how often, one call per layer each time. At the
    step's end, bucketed (``buckets``): a once-per-step gradient reduction (DDP, ZeRO-1,
    unsharded accumulation) and ZeRO-1/2's parameter all-gather."""
    reduces, gathers = dp_collective_counts(cfg)
    n = cfg.grad_replicas if cfg.hsdp_shard is None else cfg.hsdp_shard
    # sharded gradients reduce unit by unit in each backward, even with one micro-batch
    per_mb_grads = (cfg.zero_stage >= 2) & (np.asarray(reduces) > 1) | (
        (cfg.zero_stage >= 2) & framework_of(cfg).sharded_grads_per_microbatch
        & (np.asarray(cfg.grad_accumulation) == "sharded"))
    fwd = bwd = rs = grads = params = gather = 0.0
    in_bwd = np.where(cfg.reshard_after_forward, 0.5, 0.0)  # the re-gathers for backward
    for r in rows:
        if r.kind == "all_gather":
            if cfg.zero_stage == 3:
                calls = layers * gathers * (r.bytes > 0)
                seconds = call_s(system, lay, r, calls)
                fwd = fwd + seconds * (1 - in_bwd)
                bwd = bwd + seconds * in_bwd
                gather = gather + seconds / np.maximum(calls, 1)
            else:
                params = params + call_s(system, lay, r, buckets(cfg, r, n))
            continue
        calls = layers * reduces * (r.bytes > 0)
        rs = rs + np.where(per_mb_grads, call_s(system, lay, r, calls), 0.0)
        grads = grads + np.where(per_mb_grads, 0.0, call_s(system, lay, r, buckets(cfg, r, n)))
    calls = np.maximum(layers * np.asarray(reduces), 1)
    return (fwd, bwd, rs, rs / calls), grads, params, gather
