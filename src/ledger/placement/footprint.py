"""The whole of a GPU's memory, by cause, at the point of its step where it peaks.

One set of formulas for one placement (``ledger.parallel.place``) and for a grid of them
(the planner passes numpy arrays for the sizes; the categorical fields are plain).
What a rank is made of (``RankParts``):

- state        params / grads / optimizer in the framework's dtypes, divided by tp x pp
               (Megatron's stage layout) and by the ZeRO stage's shard group
- activations  what each layer saves for backward x the layers this rank holds
- logits       the output layer's s b / (tp cp) logits as the loss keeps them
               (``ledger.frameworks.losses``), on the rank holding the output layer
- buffers      ZeRO-3's gathered layer(s), root unit and unsharded gradients (all of the
               rank's layers when params stay gathered between forward and backward),
               communication buckets; what one layer's backward holds beyond its saved
               tensors (recomputed ones, its MLP's gradients); context parallelism's
               attention buffers; the pipeline outputs a framework keeps
- fragmentation  the caching allocator's reserved less its allocated bytes at the peak
               (a share of allocated, fitted: ``Framework.fragmentation`` eager,
               ``compiled_fragmentation`` under torch.compile), and the freed blocks it
               keeps cached: the logits at the loss backward (``Loss.cached_bytes``),
               the gradients zero_grad freed before the step's first backward
- context      CUDA context and NCCL communicators, outside the allocator, and the
               buffers other libraries allocate outside it (``ledger.placement.context``:
               DeepEP / HybridEP, NCCL's NVLS buffers)

The schedule says how much is alive at once (``ledger.pipeline.held``): the peak is the
largest of the step's points - a forward, the loss forward and the loss backward on the
last stage, a layer's backward, the optimizer step - not the sum of their largest
terms. ``allocated`` is what torch.cuda.max_memory_allocated reads, ``reserved`` what
max_memory_reserved reads; the device holds reserved + context. Whether a run fits is
judged on ``required``: the worst point's allocated bytes, context and the fragmentation
the allocator cannot hand back before it fails an allocation (``reclaimable``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from ledger.config import expert_tp
from ledger.frameworks.cp import CP_BUFFERS
from ledger.frameworks.fp8 import gather_wire_bytes
from ledger.frameworks.losses import loss as loss_of
from ledger.placement.allocator import (fragmentation_share, persistent_bytes, reclaimable,
                                        unreturnable_cap, unreturnable_share)
from ledger.placement.buffers import double_buffered
from ledger.memory import StateBytes

MOMENTS = ("forward", "loss forward", "loss backward", "output backward", "backward",
           "optimizer step")


@dataclass(frozen=True)
class Capacity:
    """What a GPU offers: its HBM, less a reserve kept back as headroom."""

    gpu: str
    hbm_bytes: float
    reserve_bytes: float = 0.0
    host_bytes: float = 0.0  # a node's CPU memory, what CPU offload may fill (0: unchecked)

    def host_fits(self, host_bytes_per_node: float) -> bool:
        return not self.host_bytes or host_bytes_per_node <= self.host_bytes

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
    fragmentation_bytes: float = 0.0
    context_bytes: float = 0.0
    moment: str = ""  # the point of the step where the peak falls (MOMENTS)
    cached_bytes: float = 0.0  # of fragmentation: freed blocks no request there can reuse
    kept_bytes: float = 0.0  # of buffers: the framework's own, kept for the run
    named: tuple = ()  # (name, bytes) of those (ledger.placement.buffers)
    # what the device must hold at its worst point of the step, after the allocator hands
    # back what it can before it fails an allocation (``reclaimable``); None: total_bytes
    required: float | None = None
    # (name, bytes) of the context beyond the framework's flat CUDA context: buffers
    # allocated outside PyTorch's allocator (ledger.placement.context)
    context_named: tuple = ()
    # of allocated: what is allocated once for the run and never freed (``persistent_bytes``)
    persistent_bytes: float = 0.0
    # the largest point's allocated bytes, and the most of them the verdict could count as
    # split blocks (the fragmentation share; 0 under expandable segments)
    max_allocated_bytes: float = 0.0
    share_cap: float = 0.0
    after_step_bytes: float = 0.0  # kept from the step beyond it (buffers.kept_input_tensors)

    @property
    def resident_bytes(self) -> float:
        """torch.cuda.memory_allocated after the step: state, kept buffers, after_step."""
        return self.state_bytes + self.kept_bytes + self.after_step_bytes

    def critical_share(self, usable_bytes: float) -> float:
        """The largest unreturnable share (``Framework.unreturnable``) at which this rank
        still fits ``usable_bytes``; inf when no share up to ``share_cap`` fails it
        (benchmarks/fit_memory.py bounds the share with these)."""
        if not self.max_allocated_bytes:
            return float("inf")
        c = (usable_bytes - self.context_bytes) / self.max_allocated_bytes - 1.0
        return float("inf") if c >= self.share_cap else c

    @property
    def churned_bytes(self) -> float:
        """Of allocated: what is freed and requested again every step."""
        return self.allocated_bytes - self.persistent_bytes

    @property
    def required_bytes(self) -> float:
        """The verdict's figure: the largest point's allocated bytes, the fragmentation the
        allocator cannot hand back and the context. On a failed cudaMalloc PyTorch's
        caching allocator releases its cached unsplit blocks and retries (the cached
        logits and gradients here); under expandable segments it unmaps every empty page
        as well (``reclaimable``, SOURCES["allocator_reclaim"])."""
        return self.total_bytes if self.required is None else self.required

    @property
    def allocated_bytes(self) -> float:
        """What the tensors hold: torch.cuda.max_memory_allocated at the peak."""
        return self.state_bytes + self.activations_bytes + self.logits_bytes \
            + self.buffers_bytes

    @property
    def reserved_bytes(self) -> float:
        """What the caching allocator holds: torch.cuda.max_memory_reserved."""
        return self.allocated_bytes + self.fragmentation_bytes

    @property
    def overhead_bytes(self) -> float:
        return self.fragmentation_bytes + self.context_bytes

    @property
    def total_bytes(self) -> float:
        """The device's memory in use: reserved + the CUDA context and NCCL."""
        return self.reserved_bytes + self.context_bytes


@dataclass(frozen=True)
class RankParts:
    """One pipeline rank's memory before the schedule says how much is alive at once;
    bytes (numbers or arrays), ``logits`` in elements of one micro-batch (0 off the
    output layer's rank)."""

    params: float
    grads: float
    optim: float
    stage_act: float  # one micro-batch of the rank's stage activations (whole stage; DualPipe:
    #                   each stage weighed by its share of what is alive, inflight_kinds)
    work: float  # one layer's backward beyond its saved tensors
    cp_forward: float  # context parallelism's buffers in one layer's attention forward
    cp_backward: float  # and in its backward
    buffers: float  # gathered params, buckets: alive throughout
    head: float  # one micro-batch of what the output head saves (0 off its rank)
    logits: float  # logit elements of one micro-batch on this rank
    boundary: float  # bytes of one micro-batch's stage output (kept by some frameworks)
    optimizer_temp: float  # alive during the optimizer step
    freed_grads: float = 0.0  # the optimizer's sharded gradients, freed by zero_grad
    root_grads: float = 0.0  # the output layer's (and embedding's) gradients, made first
    #   in the backward (FSDP2's in buffers; Megatron-FSDP's output bucket: head_grads)
    head_grads: float = 0.0  # head_grad_bytes
    kept: float = 0.0  # of buffers: the framework's own, kept for the run (buffers.py)
    after_step: float = 0.0  # kept from the step's end to the next forward (buffers.py)
    named: tuple = ()  # (name, bytes) of those, for the views
    outside: float = 0.0  # bytes allocated outside PyTorch's allocator (in the context)
    outside_named: tuple = ()  # (name, bytes) of those (ledger.placement.context)


def shard_group(cfg):
    """Ranks one ZeRO shard spans: dp x cp, or the HSDP shard group."""
    return cfg.grad_replicas if cfg.hsdp_shard is None else cfg.hsdp_shard


def params_sharded(cfg, fw) -> bool:
    """ZeRO-3 keeps only a shard of the params resident. The seed's ``ideal`` reading
    counts them whole when FSDP keeps them gathered between forward and backward; a real
    framework keeps the shard and holds the gathered copies as buffers (``fsdp_buffers``)."""
    if np.ndim(cfg.zero_stage):  # the planner's grid: a stage per row
        return (cfg.zero_stage >= 3) & np.logical_or(cfg.reshard_after_forward,
                                                     fw.fsdp_buffers)
    if cfg.zero_stage < 3:
        return False
    return np.logical_or(cfg.reshard_after_forward, fw.fsdp_buffers)


def _optim_divisor(cfg, n):
    """ZeRO-1 and up shard the optimizer state ``n`` ways (a stage, or an array of them)."""
    if np.ndim(cfg.zero_stage):
        return np.where(cfg.zero_stage >= 1, n, 1)
    return n if cfg.zero_stage >= 1 else 1


def divisors(cfg, fw) -> tuple:
    """(params, grads, optimizer) divisors of this GPU's unsharded state."""
    n = shard_group(cfg)
    grads = (cfg.zero_stage >= 2) & (np.asarray(cfg.grad_accumulation) == "sharded")
    return (np.where(params_sharded(cfg, fw), n, 1), np.where(grads, n, 1),
            _optim_divisor(cfg, n))


def expert_divisors(cfg, fw) -> tuple:
    """(params, grads, optimizer) divisors of this GPU's expert state: ZeRO's, over the
    expert-data-parallel group - the shard group x tp / (etp x ep) (Megatron-Core shards
    expert optimizer state over EDP; theoretical_memory_usage.py L301-302)."""
    n = np.maximum(shard_group(cfg) * cfg.tp // (expert_tp(cfg) * cfg.ep), 1)
    grads = (cfg.zero_stage >= 2) & (np.asarray(cfg.grad_accumulation) == "sharded")
    return (np.where(params_sharded(cfg, fw), n, 1), np.where(grads, n, 1),
            _optim_divisor(cfg, n))


def shard_state(dense: StateBytes, expert: StateBytes, cfg, fw) -> StateBytes:
    """Divide this GPU's unsharded state by ZeRO: dense state over its data-parallel
    group, expert state over the expert-data-parallel one. Whole bytes, rounded down as
    the seed does."""
    divs, e_divs = divisors(cfg, fw), expert_divisors(cfg, fw)
    d = (dense.params_bytes, dense.grads_bytes, dense.optim_bytes)
    e = (expert.params_bytes, expert.grads_bytes, expert.optim_bytes)
    return StateBytes(*(np.floor(d[i] / divs[i] + e[i] / e_divs[i]) for i in range(3)))


def loss_name(cfg, fw) -> str:
    """The loss a config runs: its own, or the framework's (``Framework.loss_for``)."""
    name = getattr(cfg, "loss", None)
    return fw.loss_for(cfg.tp, getattr(cfg, "compile", False)) if name is None else name


def logits_elements(model, cfg):
    """One micro-batch's logits on the output layer's GPU: s b / cp tokens x V / tp
    columns, once for the output head and once per MTP module (DeepSeek-V3 sec. 2.2)."""
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    heads = 1 + model.mtp_layers  # each MTP module predicts through the shared head
    return heads * tokens * model.vocab / cfg.tp


def logits_bytes(model, cfg, fw):
    """The most one micro-batch's loss holds at once (its backward), in bytes."""
    return logits_elements(model, cfg) * loss_of(loss_name(cfg, fw)).backward_bytes(
        cfg.act_bytes)


def buffer_bytes(cfg, fw, layer_params, layers_held, root_params=0.0) -> tuple:
    """(throughout, backward) bytes of ZeRO-3's gathered parameters and gradients, and the
    communication buckets, alive throughout.

    ``layer_params``: parameters of the largest layer on this GPU (after tp / ep);
    ``layers_held``: layers on this rank; ``root_params``: the rest of the rank's
    parameters (embedding, final norm, output layer), one unit FSDP2 keeps gathered from
    its forward to the end of the backward (torch fully_shard: the root is not resharded
    after forward). A layer is gathered in FP8 under an FP8 recipe's param gather.
    Resharding after forward, one layer is gathered at a time; its
    backward adds the next one prefetched, its unsharded gradient and the reduce-
    scatter's copy in the reduce dtype, and the root's unsharded gradients waiting for
    the root's own backward where the framework holds them (``fsdp_root_grads_held``:
    FSDP2; Megatron-FSDP's output-layer bucket: ``head_grad_bytes``). Kept gathered (and
    accumulating unsharded), every layer of the rank is, and only each layer's fresh
    gradient passes through."""
    out = fw.comm_bucket_bytes + 0.0 * layers_held
    zero3 = np.equal(cfg.zero_stage, 3)  # a stage, or the planner's array of them
    if not (np.any(zero3) and fw.fsdp_buffers):
        return out, 0.0 * out
    keep = np.logical_and(cfg.reshard_after_forward,
                          np.asarray(cfg.grad_accumulation) == "sharded")
    g = fw.gathered_param_bytes  # the root (embedding, output) is never gathered in FP8
    rec = fw.fp8
    g_layer = gather_wire_bytes(rec, zero3=True) if rec is not None and rec.param_gather else g
    pooled = keep & double_buffered(cfg, fw)  # the layers' in buffers.py's double buffers
    gathered = np.where(keep, 1 - pooled, layers_held) * layer_params * g_layer \
        + root_params * g
    held = root_params * g * fw.fsdp_root_grads_held  # the root's grads (Framework field)
    backward = np.where(keep, (1 - pooled) * (fw.fsdp_prefetch_layers * layer_params * g_layer
                                              + layer_params * (g + fw.grad_bytes)) + held,
                        layer_params * g)
    if np.ndim(zero3):
        return np.where(zero3, out + gathered, out), np.where(zero3, backward, 0.0 * out)
    return out + gathered, backward


def cp_buffer_bytes(model, cfg, fw, table) -> tuple:
    """(forward, backward) bytes of context parallelism's buffers in one attention call
    (``ledger.frameworks.cp``): ring CP only, over this rank's s b / cp tokens, K and V at
    the heads the kernel reads (all of them where K/V are repeated before it)."""
    if cfg.cp_kind != "ring":
        return 0.0 * cfg.cp, 0.0 * cfg.cp
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    width = (model.heads * (model.head_dim + model.v_head_dim) if table.flash_kv_repeated
             else model.kv_dim + model.kv_heads * model.v_head_dim)
    kv, q = tokens * width / cfg.tp, tokens * model.heads * model.head_dim / cfg.tp
    buf = CP_BUFFERS[fw.cp_buffers]
    on = cfg.cp > 1
    return (on * buf.forward_bytes(kv, q, cfg.act_bytes, cfg.cp),
            on * buf.backward_bytes(kv, q, cfg.act_bytes, cfg.cp))


def _moments(p: RankParts, held, loss, e, grads_at_loss, lazy=None):
    """(state, activations, logits, buffers) of each point of the step (MOMENTS); ``lazy``:
    (chunks, gradients' share) at a layer, the same at the loss (``grad_sets``)."""
    chunks, losses, kept_logits, kept_boundary, at_loss = held
    c_layer, g_layer, c_loss, g_loss = (chunks, 1.0, chunks, 1.0) if lazy is None else lazy
    acts = c_layer * p.stage_act + losses * p.head
    kept = kept_logits * p.logits * e  # the last stage's outputs kept to the end
    saved = losses * p.logits * loss.saved_bytes(e) + kept
    # at the rank's own loss: the other losses alive then (held_closed's at_loss)
    acts_l = c_loss * p.stage_act + at_loss * p.head
    saved_l = at_loss * p.logits * loss.saved_bytes(e) + kept
    fresh = np.where(kept_logits > 0, 0.0, e)  # this loss's logits, unless counted as kept
    state_f = p.params + p.optim + p.grads * grads_at_loss * g_layer
    state_l = p.params + p.optim + p.grads * grads_at_loss * g_loss
    boundary = kept_boundary * p.boundary + p.buffers
    zero = 0.0 * acts
    root = p.root_grads * (1 - grads_at_loss)  # the backward has begun
    grads_b, grads_bl = state_f + root, state_l + root
    with_head = acts_l + p.head  # the output head's own, from its forward to its backward
    return [
        (state_f, acts, saved, boundary + p.cp_forward),
        (state_l, with_head, saved_l + p.logits * (loss.forward_bytes(e) - e + fresh),
         boundary),
        (state_l, with_head, saved_l + p.logits * loss.backward_bytes(e), boundary),
        (grads_bl, with_head, saved_l + p.logits * loss.grad_bytes(e), boundary + p.head_grads),
        (grads_b, acts, saved, boundary + p.work + p.cp_backward + p.head_grads),
        (p.params + p.optim + p.grads, zero, zero, p.buffers + p.optimizer_temp + p.after_step),
    ]


def _largest(parts: RankParts, held, loss, e, grads_at_loss, sets=None):
    """``_moments`` at the largest of ``sets`` (``ledger.pipeline.grad_sets``) moment by
    moment, element by element over a grid (a point's every term grows with its sum)."""
    best = _moments(parts, held, loss, e, grads_at_loss, None if sets is None else sets[0])
    for lazy in (sets or ())[1:]:
        best = [tuple(np.where(sum(pt) >= sum(o), a, b) for a, b in zip(pt, o))
                for pt, o in zip(best, _moments(parts, held, loss, e, grads_at_loss, lazy))]
    return best


def point_bytes(parts: RankParts, held, cfg, fw, grads_at_loss, sets=None) -> dict[str, float]:
    """Allocated bytes at each point of the step (MOMENTS), by name."""
    loss = loss_of(loss_name(cfg, fw))
    points = _largest(parts, held, loss, cfg.act_bytes, grads_at_loss, sets)
    return {name: sum(pt) for name, pt in zip(MOMENTS, points)}


def _point_sums(parts: RankParts, held, cfg, fw, grads_at_loss, sets=None):
    """(the points' (state, activations, logits, buffers), their allocated bytes (the sum
    of the four), their fragmentation, the cached part of it, the split blocks of it the
    allocator keeps through a failed cudaMalloc (``unreturnable_share``))."""
    loss = loss_of(loss_name(cfg, fw))
    points = _largest(parts, held, loss, cfg.act_bytes, grads_at_loss, sets)
    # freed blocks the allocator keeps but no request at that point can reuse: the logits
    # during the loss backward, and the sharded gradients zero_grad freed at the step's
    # start (per-unit blocks smaller than the activations and unsharded gradients the step
    # asks for), until the optimizer step refills them
    freed = parts.freed_grads * (1 - fw.grads_persist)
    logits = parts.logits * loss.cached_bytes(cfg.act_bytes)
    cached = [freed, freed, freed + logits, freed, freed, 0.0]
    share = fragmentation_share(cfg, fw)
    sums = [sum(pt) for pt in points]
    kept = unreturnable_share(cfg, fw)
    return points, sums, [share * a + c for a, c in zip(sums, cached)], cached, \
        [kept * a for a in sums]


def peak_total(parts: RankParts, held, cfg, fw, grads_at_loss, sets=None):
    """What the device must hold at its worst point: ``peak_memory(...).required_bytes``
    without the breakdown (the planner's grid, judged as ``report`` judges)."""
    _, sums, frag, _, split = _point_sums(parts, held, cfg, fw, grads_at_loss, sets)
    back = reclaimable(frag, split)
    return reduce(np.maximum, [a + f - b for a, f, b in zip(sums, frag, back)]) \
        + fw.overhead_bytes + parts.outside


def peak_memory(rank: int, parts: RankParts, held, cfg, fw, grads_at_loss, sets=None):
    """The largest point of the step (``_moments``) of one rank, by what the device
    holds there - allocated, the allocator's fragmentation (``Framework.fragmentation``
    of allocated, and the freed blocks it keeps cached) and the context. ``held``:
    (chunks, losses, logits kept, boundary outputs kept, losses at the loss) from
    ``ledger.pipeline.held``; ``sets``: where lazily made gradients put the peak
    (``ledger.pipeline.grad_sets``)."""
    points, sums, frag, cached, split = _point_sums(parts, held, cfg, fw, grads_at_loss, sets)
    best = int(np.argmax([float(sum(pt) + f) for pt, f in zip(points, frag)]))
    state, acts, logits, buffers = (float(x) for x in points[best])
    back = reclaimable(frag, split)
    need = max(float(sum(pt) + f - b) for pt, f, b in zip(points, frag, back))
    context = fw.overhead_bytes + float(parts.outside)
    return MemoryBreakdown(rank, state, acts, logits, buffers, float(frag[best]),
                           context, MOMENTS[best], float(cached[best]),
                           float(parts.kept), parts.named, need + context,
                           context_named=parts.outside_named,
                           persistent_bytes=float(persistent_bytes(parts, state, fw)),
                           max_allocated_bytes=float(max(sums)),
                           share_cap=unreturnable_cap(cfg, fw),
                           after_step_bytes=float(parts.after_step))
