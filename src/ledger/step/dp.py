"""Data-parallel traffic in seconds, split by when it can run: layer by layer (ZeRO-3's
parameter gathers, per-micro-batch gradient reduce-scatters) or once at the step's end
(bucketed gradient reduction, ZeRO-1/2's parameter all-gather). ledger.step hides each
under the compute it can overlap; the bytes are ledger.placement.comms' DP rows."""
from __future__ import annotations

import numpy as np

from ledger.placement import dp_collective_counts
from ledger.system import System

# Megatron-Core's DDP bucket: max(40M, 1M x dp) parameters per bucket
# (megatron/core/distributed/distributed_data_parallel.py:134 at d98e8a64dd); every
# bucket is one collective call, so DP latency is paid per bucket.
DP_BUCKET_PARAMS = 40_000_000
DP_BUCKET_PARAMS_PER_RANK = 1_000_000


def dp_split(rows, cfg, system: System, layers):
    """((layer-wise gathers in forwards, gathers in backwards, per-micro-batch reduce-
    scatters, one such call), step-end grads, step-end params, one layer's gather)
    seconds of ledger.placement.comms' DP rows. Layer by layer: ZeRO-3's parameter gathers - in
    the forwards, and half of them in the backwards when parameters are resharded after
    forward - and the reduce-scatters (and HSDP replica all-reduces) a framework runs
    after every micro-batch's backward;
    ``comms.dp_collective_counts`` says how often, one call per layer each time. At the
    step's end, bucketed (Megatron's bucket size, one latency per call): a once-per-step
    gradient reduction (DDP, ZeRO-1, unsharded accumulation) and ZeRO-1/2's parameter
    all-gather."""
    reduces, gathers = dp_collective_counts(cfg)
    n = cfg.grad_replicas if cfg.hsdp_shard is None else cfg.hsdp_shard
    per_mb_grads = (cfg.zero_stage >= 2) & (np.asarray(reduces) > 1)
    bucket = np.maximum(DP_BUCKET_PARAMS, DP_BUCKET_PARAMS_PER_RANK * n)
    fwd = bwd = rs = grads = params = gather = 0.0
    in_bwd = np.where(cfg.reshard_after_forward, 0.5, 0.0)  # the re-gathers for backward
    for r in rows:
        seconds = r.bytes / system.bandwidth(r.link)
        hops = (2 if r.kind == "all_reduce" else 1) * (n - 1) * system.latency(r.link)
        buckets = np.ceil(r.bytes / (4.0 * bucket))  # fp32 grads per bucket; 0 if empty
        if r.kind == "all_gather":
            if cfg.zero_stage == 3:
                calls = layers * gathers * (r.bytes > 0)
                fwd = fwd + (seconds + calls * hops) * (1 - in_bwd)
                bwd = bwd + (seconds + calls * hops) * in_bwd
                gather = gather + (seconds + calls * hops) / np.maximum(calls, 1)
            else:
                params = params + seconds + buckets * hops
            continue
        calls = layers * reduces * (r.bytes > 0)
        rs = rs + np.where(per_mb_grads, seconds + calls * hops, 0.0)
        grads = grads + np.where(per_mb_grads, 0.0, seconds + buckets * hops)
    calls = np.maximum(layers * np.asarray(reduces), 1)
    return (fwd, bwd, rs, rs / calls), grads, params, gather
