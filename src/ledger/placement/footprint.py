"""The whole of a GPU's memory, by cause: state, activations, logits, buffers, overhead.

One set of formulas for one placement (``ledger.parallel.place``) and for a grid of them
(the planner passes numpy arrays for the sizes; the categorical fields are plain):

- state        params / grads / optimizer in the framework's dtypes, divided by tp x pp
               (Megatron's stage layout) and by the ZeRO stage's shard group
- activations  what each layer saves for backward x the layers this rank holds x the
               micro-batches its schedule keeps in flight
- logits       what the loss keeps of the output layer's s b V / (tp cp) logits, on the
               rank holding the output layer, per micro-batch in flight there
- buffers      ZeRO-3: the gathered layer(s) in the GEMM dtype plus one layer's unsharded
               gradient before its reduce-scatter (all of the rank's layers when params
               stay gathered between forward and backward); communication buckets; under
               full recompute the working set of the one layer being recomputed
- overhead     CUDA context and NCCL communicators, plus allocator fragmentation as a
               share of everything above
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ledger.config import expert_tp
from ledger.memory import StateBytes


@dataclass(frozen=True)
class Capacity:
    """What a GPU offers: its HBM, less a reserve kept back as headroom."""

    gpu: str
    hbm_bytes: float
    reserve_bytes: float = 0.0

    @property
    def usable_bytes(self) -> float:
        return self.hbm_bytes - self.reserve_bytes


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one GPU of one pipeline rank holds at its peak, by cause."""

    rank: int
    state_bytes: float
    activations_bytes: float
    logits_bytes: float
    buffers_bytes: float
    overhead_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.state_bytes + self.activations_bytes + self.logits_bytes
                + self.buffers_bytes + self.overhead_bytes)


def shard_group(cfg):
    """Ranks one ZeRO shard spans: dp x cp, or the HSDP shard group."""
    return cfg.grad_replicas if cfg.hsdp_shard is None else cfg.hsdp_shard


def params_sharded(cfg, fw) -> bool:
    """ZeRO-3 keeps only a shard of the params resident. The seed's ``ideal`` reading
    counts them whole when FSDP keeps them gathered between forward and backward; a real
    framework keeps the shard and holds the gathered copies as buffers (``fsdp_buffers``)."""
    if cfg.zero_stage < 3:
        return False
    return np.logical_or(cfg.reshard_after_forward, fw.fsdp_buffers)


def divisors(cfg, fw) -> tuple:
    """(params, grads, optimizer) divisors of this GPU's unsharded state."""
    n = shard_group(cfg)
    grads = (cfg.zero_stage >= 2) & (np.asarray(cfg.grad_accumulation) == "sharded")
    return (np.where(params_sharded(cfg, fw), n, 1), np.where(grads, n, 1),
            n if cfg.zero_stage >= 1 else 1)


def expert_divisors(cfg, fw) -> tuple:
    """(params, grads, optimizer) divisors of this GPU's expert state: ZeRO's, over the
    expert-data-parallel group - the shard group x tp / (etp x ep) (Megatron-Core shards
    expert optimizer state over EDP; theoretical_memory_usage.py L301-302)."""
    n = np.maximum(shard_group(cfg) * cfg.tp // (expert_tp(cfg) * cfg.ep), 1)
    grads = (cfg.zero_stage >= 2) & (np.asarray(cfg.grad_accumulation) == "sharded")
    return (np.where(params_sharded(cfg, fw), n, 1), np.where(grads, n, 1),
            n if cfg.zero_stage >= 1 else 1)


def shard_state(dense: StateBytes, expert: StateBytes, cfg, fw) -> StateBytes:
    """Divide this GPU's unsharded state by ZeRO: dense state over its data-parallel
    group, expert state over the expert-data-parallel one. Whole bytes, rounded down as
    the seed does."""
    divs, e_divs = divisors(cfg, fw), expert_divisors(cfg, fw)
    d = (dense.params_bytes, dense.grads_bytes, dense.optim_bytes)
    e = (expert.params_bytes, expert.grads_bytes, expert.optim_bytes)
    return StateBytes(*(np.floor(d[i] / divs[i] + e[i] / e_divs[i]) for i in range(3)))


def logits_bytes(model, cfg, fw):
    """One micro-batch's logits as the loss keeps them: s b / cp tokens x V / tp columns
    x the framework's bytes per logit (fp32 softmax for backward, and its gradient), once
    for the output head and once per MTP module (DeepSeek-V3 sec. 2.2)."""
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    heads = 1 + model.mtp_layers  # each MTP module predicts through the shared head
    return heads * tokens * model.vocab / cfg.tp * fw.logits_bytes


def buffer_bytes(cfg, fw, layer_params, layers_held, working_set):
    """Gathered-parameter and gradient buffers (ZeRO-3), buckets, recompute working set.

    ``layer_params``: parameters of the largest layer on this GPU (after tp / ep);
    ``layers_held``: layers on this rank; ``working_set``: one layer's activations when
    recomputed (0 without full recompute)."""
    out = fw.comm_bucket_bytes + working_set
    if cfg.zero_stage == 3 and fw.fsdp_buffers:
        # resharded: the layer computing and the one prefetched; otherwise (or when the
        # params stay gathered after backward, accumulating unsharded) all the rank's layers
        keep = np.logical_and(cfg.reshard_after_forward,
                              np.asarray(cfg.grad_accumulation) == "sharded")
        gathered = np.where(keep, 1 + fw.fsdp_prefetch_layers, layers_held)
        out = out + gathered * layer_params * fw.gathered_param_bytes \
            + layer_params * fw.grad_bytes
    return out + 0.0 * layers_held


def overhead_bytes(fw, allocated):
    """CUDA context + NCCL, and the caching allocator's fragmentation of ``allocated``."""
    return fw.overhead_bytes + fw.fragmentation * allocated
