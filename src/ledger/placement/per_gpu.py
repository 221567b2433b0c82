"""Parallelism as state placement: per-GPU state, per-step communication, pipeline bubble.

Input: a ModelSpec, its whole-model StateBytes and a ParallelConfig. Output: a
Placement with the bytes each GPU holds and, per axis and collective, the bytes
each GPU sends in one training step. No torch.

>>> from ledger.model import llama3_70b
>>> shape = dict(tp=8, pp=4, dp=32, zero_stage=1, num_microbatches=16, vp=2)
>>> pl = place(llama3_70b(), ParallelConfig(**shape, framework="ideal"))  # the seed's
>>> round(pl.bubble_fraction, 3), round(pl.total_bytes("tp") / 2**30, 2)
(0.086, 280.0)

Megatron-Core (the default) saves only the SP shard and all-gathers it again in the
backward, so its TP all-gathers are 1.5x its reduce-scatters:

>>> mc = place(llama3_70b(), ParallelConfig(**shape))
>>> [(c.kind, c.bytes / 2**30) for c in mc.comms if c.axis == "tp"]
[('all_gather', 210.0), ('reduce_scatter', 140.0)]
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ledger.arch import head_bytes
from ledger.arch import table as saved_table
from ledger.config import ParallelConfig, expert_tp
from ledger.errors import LedgerError, require_divides
from ledger.arch.recurrent import has_gdn
from ledger.frameworks import of as framework_of, with_weights as with_fp8_weights
from ledger.frameworks.recompute_modules import MLA_ATTENTIONS, recompute_module_problems
from ledger.memory import StateBytes
from ledger.model import ModelSpec
from ledger.optim import muon
from ledger.pipeline import grad_sets, held_closed, placement_pipeline
from ledger.placement import offload as offloading, optim_offload, tuned
from ledger.placement.bf16_layers import bf16_activation_bytes, bf16_kinds
from ledger.placement.buffers import (deferred_wgrad_bytes, fp32_grad_copies, framework_buffers,
                                      head_grad_bytes, kept_input_tensors, recv_buffers)
from ledger.placement.context import context_buffers
from ledger.placement.nccl_buffers import nccl_buffers
from ledger.placement.comms import (Comm, block_layers, cp_comms, dp_collective_counts, dp_comms,
                                    dp_rows, ep_comms, expert_fraction, pp_comms,
                                    tied_embedding_comms, tp_comms)
from ledger.placement.experts import check_model
from ledger.placement.footprint import (MemoryBreakdown, RankParts, buffer_bytes,
                                        cp_buffer_bytes, divisors, expert_divisors,
                                        logits_elements, peak_memory, point_bytes, shard_state)
from ledger.placement.chunks import own_chunks, stage_weights
from ledger.placement.layers import (activation_bytes_per_layer, inflight_kinds,
                                     largest_layer_params, layer_activation_bytes, layer_kinds,
                                     layer_offloaded_bytes, layer_stashed_bytes,
                                     layer_working_bytes)
from ledger.placement.layout import DEFAULT_ORDER, Layout
from ledger.placement.splits import split_problem
from ledger.placement.stash import stash_buffer_bytes, with_stash
from ledger.placement.stages import (config_split, end_params, head_ranks, rank_layers,
                                     rank_stages, stage_params)


def validate(model: ModelSpec, cfg: ParallelConfig) -> None:
    """Refuse a config this model cannot run with; each message shows the numbers."""
    problem = split_problem(model, cfg.tp, cfg.cp, cfg.cp_kind)
    if problem is not None:
        raise LedgerError(*problem)
    framework_of(cfg).check_pipeline(model.layers, cfg.pp, cfg.vp, cfg.schedule,
                                     own_split=cfg.stage_layers is not None)
    config_split(model, cfg)  # a split of its own must hold the model's layers
    if cfg.cp > 1:  # ring balances causal work over 2*cp chunks (head-tail pairing)
        chunks = 2 * cfg.cp if cfg.cp_kind == "ring" else cfg.cp
        require_divides("seq_len", model.seq_len, "2*cp" if chunks > cfg.cp else "cp", chunks)
    check_model(model, cfg)
    if cfg.recompute == "selective":  # the model's half of Megatron's module checks
        for field, problem in recompute_module_problems(
                cfg.recompute_modules, has_gdn(model), model.hc_mult > 0,
                model.attention in MLA_ATTENTIONS, model.is_moe):
            raise LedgerError(field, problem)


@dataclass(frozen=True)
class Placement:
    per_gpu: StateBytes  # the seed's even split: every byte / (tp*pp), ZeRO by stage
    comms: list[Comm]
    bubble_fraction: float  # PP bubble as a share of the whole step
    tokens_per_gpu_per_mb: int
    activation_bytes_per_layer: float = 0.0  # one micro-batch, flash attention
    layers_per_stage: float = 0.0
    heaviest_stage: StateBytes | None = None  # Megatron's layout of the fullest PP rank
    heaviest_rank: int = 0
    world: int = 0
    peak_inflight: tuple[float, ...] = (1.0,)  # per PP rank, micro-batches (simulated)
    peak_rank: int = 0  # the PP rank whose state + activations in flight is largest
    activation_bytes: float = 0.0  # that rank's activations in flight at its peak
    peak_bytes: float = 0.0  # that rank's whole memory (``memory.total_bytes``)
    memory: MemoryBreakdown | None = None  # the peak rank's memory by cause
    memory_by_rank: tuple[MemoryBreakdown, ...] = ()  # every PP rank's
    tuned: tuned.TunedLedger | None = None  # a fine-tune's own figures (cfg.finetune)
    host_bytes_per_gpu: float = 0.0  # CPU offload: what the host holds for one GPU
    host_transfers: tuple = ()  # CPU offload: host-link rows (ledger.placement.offload)
    host_bytes_per_node: float = 0.0  # that, for every GPU of a node
    host_step_params: float = 0.0  # CPU offload: parameters a node's host steps each step

    def total_bytes(self, axis: str | None = None) -> float:
        return sum(c.bytes for c in self.comms if axis is None or c.axis == axis)

    def by_kind(self) -> dict[str, float]:
        return _sum_by(self.comms, "kind")

    def by_link(self) -> dict[str, float]:
        return {"nvlink": 0.0, "ib": 0.0} | _sum_by(self.comms, "link")


def dp_traffic(model: ModelSpec, st: StateBytes, cfg: ParallelConfig, lay: Layout) -> list[Comm]:
    """The DP rows: of the whole state, or of what a fine-tune trains and gathers."""
    if getattr(cfg, "finetune", None) is None:
        return dp_comms(model, st, cfg, lay)
    w = tuned.wire(model, cfg, framework_of(cfg))
    apart = np.asarray((cfg.ep > 1) | (expert_tp(cfg) != cfg.tp))  # else: reduced as dense
    dense = (w.dense_params + w.expert_params * ~apart,
             w.dense_grads + w.expert_grads * ~apart)
    return dp_rows(model, cfg, lay, dense, (w.expert_params * apart, w.expert_grads * apart))


def _sum_by(comms: list[Comm], key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in comms:
        out[getattr(c, key)] = out.get(getattr(c, key), 0.0) + c.bytes
    return out


def per_gpu_state(model: ModelSpec, st: StateBytes, cfg: ParallelConfig) -> StateBytes:
    """The even split: tp x pp divide every dense byte, etp x ep x pp the expert bytes,
    ZeRO the rest."""
    f, mp = expert_fraction(model, cfg), cfg.tp * cfg.pp
    return shard_state(st.scaled((1 - f) / mp), st.scaled(f / (expert_tp(cfg) * cfg.pp
                                                                * cfg.ep)), cfg,
                       framework_of(cfg))


def resident_state(model: ModelSpec, cfg: ParallelConfig, optimizer: str = "adam") -> StateBytes:
    """Whole-model state in the framework's dtypes (or the config's explicit precision);
    a factored optimizer's rate from the model's own matrices."""
    rate = tuned.factored_rate(model) if optimizer == "adafactor" else 0.0
    share = muon.managed_share(model) if muon.form(optimizer) else 1.0
    return framework_of(cfg).state_per_param(cfg.zero_stage, optimizer, rate,
                                             share).scaled(model.params)


def rank_states(model: ModelSpec, cfg: ParallelConfig, st: StateBytes, optimizer: str,
                counts, kinds, gpu=None) -> list[StateBytes]:
    """Every PP rank's state on one GPU, ZeRO applied, before any offload: the whole
    model's ``st`` per parameter over the stage's parameters, or a fine-tune's classes
    (``ledger.placement.tuned``)."""
    fw = framework_of(cfg)
    if cfg.finetune is not None:
        return [shard_state(d, e, cfg, fw) for d, e in tuned.stage_state(model, cfg, fw, optimizer)]
    per_param = st.scaled(1 / model.params)
    layout = (cfg.pp, cfg.vp, cfg.schedule, config_split(model, cfg), "ends")
    return [with_fp8_weights(shard_state(per_param.scaled(d), per_param.scaled(e), cfg, fw),
                             model, cfg, fw, counts[r], kinds,
                             sum(bf16_kinds(model, fw, r, *layout).values()), gpu,
                             _param_divs(cfg, fw))  # the recipe's BF16 layers: no low copies
            for r, (d, e) in enumerate(stage_params(model, cfg))]


def _param_divs(cfg, fw) -> tuple:
    """ZeRO's divisors of this GPU's dense and expert params (FP8 params shard alike)."""
    return divisors(cfg, fw)[0], expert_divisors(cfg, fw)[0]


def _among(ranks, members) -> np.ndarray:
    """``np.isin(ranks, members)`` for the few ranks of a pipeline (without its sort)."""
    ranks = np.asarray(ranks)
    keep = set(members)
    return np.array([r in keep for r in ranks.ravel().tolist()], dtype=bool).reshape(
        ranks.shape)


def root_params(model: ModelSpec, cfg, rank) -> float:
    """Parameters of one GPU of PP rank ``rank`` (a rank or an array of them) outside its
    transformer layers (``ledger.placement.stages.end_params``): the embedding's on the
    first stage's rank, the output layer's on the last's."""
    first, last = end_params(model, cfg)
    ranks = np.asarray(rank)
    firsts = [r for r, held in enumerate(rank_stages(cfg.pp, cfg.vp, cfg.schedule)) if 0 in held]
    return first * _among(ranks, firsts) + last * _among(ranks, head_ranks(
        cfg.pp, cfg.vp, cfg.schedule))


def head_activation_bytes(model: ModelSpec, cfg) -> float:
    """One micro-batch of what the output head saves (``ledger.arch.head_bytes``), and
    beside it, through the loss, the last layer's inputs fine-grained activation offload
    keeps on the GPU (``act_offload``'s margin)."""
    margin = layer_offloaded_bytes(model, cfg) if getattr(cfg, "offload_modules", ()) else 0.0
    return head_bytes(model, micro_batch=cfg.micro_batch, tp=cfg.tp, cp=cfg.cp,
                      sequence_parallel=cfg.sequence_parallel, act_bytes=cfg.act_bytes,
                      table=saved_table(framework_of(cfg).activations)) + margin


def rank_parts(model: ModelSpec, cfg, fw, ranks, state: StateBytes, stage_act, work,
               layers_held, per_param: StateBytes, named: dict | None = None,
               outside: dict | None = None) -> RankParts:
    """What the pipeline ranks ``ranks`` (a rank, or an array of them) are made of (footprint's
    RankParts): their sharded ``state``, one micro-batch of their stage activations, one
    layer's backward working set ``work`` - numbers, or arrays over a grid (the planner)."""
    out_rank = _among(np.asarray(ranks), head_ranks(cfg.pp, cfg.vp, cfg.schedule))  # output layer
    cp_fwd, cp_bwd = cp_buffer_bytes(model, cfg, fw, saved_table(fw.activations))
    boundary = model.seq_len * cfg.micro_batch / cfg.cp * model.hidden * cfg.act_bytes \
        / np.where(cfg.sequence_parallel, cfg.tp, 1)
    root, fw_b = root_params(model, cfg, ranks), tuned.buffer_framework(model, cfg, fw)
    always, backward = buffer_bytes(cfg, fw_b, largest_layer_params(model, cfg), layers_held, root)
    always = always + tuned.dequant_bytes(model, cfg) + out_rank * deferred_wgrad_bytes(
        cfg, logits_elements(model, cfg), 1 + model.mtp_layers, boundary)  # QLoRA's; deferral
    kept = sum((named or {}).values()) + 0.0 * always  # the framework's own (buffers.py)
    recv, inputs = (np.array([f(cfg, fw, r) for r in np.ravel(ranks)]).reshape(np.shape(ranks))
                    for f in (recv_buffers, kept_input_tensors))
    per_optim = max(per_param.optim_bytes, 1e-30)  # per byte of optimizer state
    return RankParts(
        params=state.params_bytes, grads=state.grads_bytes, optim=state.optim_bytes,
        stage_act=stage_act, work=work + backward,
        cp_forward=cp_fwd, cp_backward=cp_bwd,
        root_grads=root * per_param.grads_bytes * (cfg.zero_stage < 3), head_grads=
        head_grad_bytes(cfg, fw_b, root, end_params(model, cfg)[1] * out_rank),
        buffers=always + kept + recv * cfg.num_microbatches * boundary, kept=kept,
        after_step=inputs * boundary + fp32_grad_copies(cfg, fw) * state.optim_bytes * 4
        / per_optim,  # the optimizer's fp32 copies of its (sharded) gradients
        named=tuple(sorted((k, v) for k, v in (named or {}).items() if np.ndim(v) == 0)),
        head=head_activation_bytes(model, cfg) * out_rank,
        logits=logits_elements(model, cfg) * out_rank, boundary=boundary,
        optimizer_temp=state.optim_bytes * fw.optimizer_temp_moments * fw.moment_bytes
        / per_optim,
        freed_grads=state.optim_bytes * per_param.grads_bytes / per_optim,
        outside=sum((outside or {}).values()), outside_named=tuple(sorted(
            (k, v) for k, v in (outside or {}).items() if np.ndim(v) == 0)))


def _rank_inputs(model: ModelSpec, cfg: ParallelConfig, st: StateBytes,
                 inflight: tuple[float, ...], optimizer: str = "adam", gpu=None,
                 context: dict | None = None):
    """Per PP rank: (rank, RankParts, the peak point, gradients at the loss, ``grad_sets``)."""
    fw = framework_of(cfg)
    per_param = st.scaled(1 / model.params)
    split = config_split(model, cfg)
    held = rank_layers(model.layers, cfg.pp, cfg.vp, cfg.schedule, split)
    kinds, counts = layer_kinds(model, cfg.pp, cfg.vp, cfg.schedule, split)
    layout = (cfg.pp, cfg.vp, cfg.schedule, split, "ends")  # the split as given
    alive = inflight_kinds(model, cfg.pp, cfg.vp, cfg.schedule, split)[1]  # as in flight
    per_kind = [layer_activation_bytes(model, cfg, k) for k in kinds]
    weights = stage_weights(model, cfg, split, kinds, per_kind)  # each model stage's bytes
    work = max(layer_working_bytes(model, cfg, k) for k in kinds) * fw.working_set
    grads_at_loss = fw.grads_persist or cfg.num_microbatches > 1
    states = rank_states(model, cfg, st, optimizer, counts, kinds, gpu)
    for r, state in enumerate(states):
        state = optim_offload.on_gpu(offloading.on_gpu(state, cfg.offload), cfg)
        named = framework_buffers(model, cfg, [k for k, n in zip(kinds, counts[r]) if n], fw,
                                  getattr(gpu, "generation", ""), r)
        chunks = inflight[min(r, len(inflight) - 1)]
        own, at_loss = own_chunks(cfg, weights, r, chunks)  # its chunks' own (placement.chunks)
        acts = (sum(n * a for n, a in zip(alive[r], per_kind)) if own is None else own) + \
            bf16_activation_bytes(model, cfg, fw, r, layout, kinds, counts, alive)  # BF16
        parts = rank_parts(model, cfg, fw, r, state, acts,
                           work, held[r], per_param, named,
                           context_buffers(model, cfg) if context is None else context)
        point = (chunks, 0, 0, 0, 0) if cfg.pp == 1 else held_closed(
            cfg.schedule, r, cfg.pp, cfg.num_microbatches, cfg.vp, fw.pipeline_outputs,
            inflight=chunks, grads_kept=fw.pipeline_input_grads)
        parts = with_stash(parts, stash_buffer_bytes(cfg, sum(  # placement.stash
            n * layer_stashed_bytes(model, cfg, k) for n, k in zip(alive[r], kinds)), point[0]))
        yield r, parts, tuple(float(x) for x in point), grads_at_loss, None if cfg.pp == 1 \
            else [(a, b, c * at_loss, d) for a, b, c, d in grad_sets(  # placement.chunks
                cfg.schedule, r, cfg.pp, cfg.num_microbatches, cfg.vp, not fw.grads_persist,
                inflight=chunks, group=cfg.vp_group)]


def memory_by_rank(model: ModelSpec, cfg: ParallelConfig, st: StateBytes,
                   inflight: tuple[float, ...], optimizer: str = "adam",
                   gpu=None, context: dict | None = None) -> list[MemoryBreakdown]:
    """Every pipeline rank's peak memory by cause (``ledger.placement.footprint``), what
    is alive at once set by the schedule (``ledger.pipeline.held``); ``context``: named
    bytes outside the allocator the placement's layout sets (NCCL's NVLS buffers)."""
    fw = framework_of(cfg)
    return [peak_memory(r, parts, point, cfg, fw, grads, sets)
            for r, parts, point, grads, sets in _rank_inputs(model, cfg, st, inflight, optimizer,
                                                       gpu, context)]


def memory_points(model: ModelSpec, cfg: ParallelConfig, rank: int = -1,
                  optimizer: str = "adam") -> dict[str, float]:
    """Allocated bytes at each point of rank ``rank``'s step (``footprint.MOMENTS``): what
    a measured step's phases are held to (ledger.verify.steps)."""
    st = resident_state(model, cfg, optimizer)
    inflight = (1.0,) if cfg.pp == 1 else placement_pipeline(
        cfg.schedule, cfg.pp, cfg.num_microbatches, cfg.vp, cfg.vp_group)[1]
    inputs = list(_rank_inputs(model, cfg, st, inflight, optimizer))
    r, parts, point, grads, sets = inputs[rank]
    return point_bytes(parts, point, cfg, framework_of(cfg), grads, sets)


def place(model: ModelSpec, *args, precision: str | None = None, optimizer: str = "adam",
          gpus_per_node: int = 8, order: str = DEFAULT_ORDER,
          gpus_per_domain: int | None = None, gpu=None, nvls: bool = False) -> Placement:
    """The ledger of one placement: ``place(model, cfg)`` (state in the config's framework
    dtypes, or an explicit ``precision``) or the seed's ``place(model, state_bytes, cfg)``.
    Links come from the rank layout: a group inside one scale-up domain of
    ``gpus_per_domain`` GPUs (default: one host of ``gpus_per_node``) rides NVLink; the
    host bounds what CPU offload puts on one host's memory. ``gpu`` (a
    ``ledger.system.GPU``) says how Transformer Engine lays out FP8 weights on it; ``nvls``
    whether the domain's switches multicast (NCCL's NVLS buffers, ``nccl_buffers``)."""
    if len(args) == 2:
        st, cfg = args
    else:
        cfg = args[0] if args else None
        if isinstance(cfg, ParallelConfig) and precision is not None:
            cfg = replace(cfg, precision=precision)
        st = resident_state(model, cfg, optimizer) if isinstance(cfg, ParallelConfig) else None
    if not isinstance(cfg, ParallelConfig) or not isinstance(st, StateBytes):
        raise TypeError("place(model, cfg) or place(model, state_bytes, cfg)")
    validate(model, cfg)
    lay = Layout(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep, etp=cfg.etp,
                 hsdp_shard=cfg.hsdp_shard, order=order, gpus_per_node=gpus_per_node,
                 gpus_per_domain=gpus_per_domain)
    layers = model.layers / cfg.pp
    tokens = model.seq_len * cfg.micro_batch // cfg.cp  # per GPU per micro-batch
    s_act = tokens * model.hidden * cfg.act_bytes  # one activation tensor
    blocks = block_layers(model) / cfg.pp  # TP's collectives: a mixer and an MLP a layer
    comms = [c for c in tp_comms(cfg, s_act, blocks, lay.link("tp"))
             + cp_comms(model, cfg, tokens, layers, lay.link("cp"))
             + pp_comms(cfg, s_act, lay.link("pp"))
             + tied_embedding_comms(model, cfg, tuned.tied_state(model, cfg, st), lay.link("pp"))
             + dp_traffic(model, st, cfg, lay)
             + ep_comms(model, cfg, tokens, lay) if c.bytes > 0]
    fw = framework_of(cfg)
    kinds, counts = layer_kinds(model, cfg.pp, cfg.vp, cfg.schedule, config_split(model, cfg))
    stages = rank_states(model, cfg, st, optimizer, counts, kinds, gpu)
    heaviest = max(range(cfg.pp), key=lambda r: stages[r].total_bytes)
    bubble, inflight = 0.0, (1.0,)  # without a pipeline one micro-batch is alive at a time
    if cfg.pp > 1:
        bubble, inflight = placement_pipeline(cfg.schedule, cfg.pp, cfg.num_microbatches,
                                              cfg.vp, cfg.vp_group)
    span = lay.span("ep") if cfg.ep > 1 else None  # EP ranks sharing an NVLink domain
    ep_local = int(lay.per_node("ep")) if span is not None else min(cfg.ep, 8)
    context = context_buffers(model, cfg, ep_local) | nccl_buffers(
        cfg, lay, getattr(gpu, "generation", ""), nvls)
    ranks = memory_by_rank(model, cfg, st, inflight, optimizer, gpu, context)
    top = max(ranks, key=lambda m: m.total_bytes)
    if cfg.finetune is not None:
        even = StateBytes(*(sum(getattr(s, f) for s in stages) / cfg.pp
                            for f in ("params_bytes", "grads_bytes", "optim_bytes")))
    else:
        even = with_fp8_weights(per_gpu_state(model, st, cfg), model, cfg, fw,  # + FP8 copies
                                counts.sum(axis=0) / cfg.pp, kinds,
                                sum(getattr(fw.fp8, "bf16_layers", (0, 0))) / cfg.pp, gpu,
                                _param_divs(cfg, fw))
    host, rows, stepped = _offload(model, cfg, stages, heaviest)
    if cfg.offload_modules:  # fine-grained activation offload (act_offload)
        per_mb = [float(sum(n * layer_offloaded_bytes(model, cfg, k)
                            for k, n in zip(kinds, c))) for c in counts]
        host += max(b * inflight[min(r, len(inflight) - 1)]  # the micro-batches in flight
                    for r, b in enumerate(per_mb))
        moved = per_mb[heaviest] * cfg.num_microbatches
        rows = list(rows) + [
            offloading.HostTransfer("d2h", moved, "yes", "activations offloaded in the forward"),
            offloading.HostTransfer("h2d", moved, "yes", "reloaded before their backward")]
    ledger = tuned.ledger(model, cfg, top.rank) if cfg.finetune else None
    node = min(gpus_per_node, cfg.world)
    return Placement(even, comms, bubble, tokens,
                     activation_bytes_per_layer(model, cfg), layers, stages[heaviest],
                     heaviest, cfg.world, inflight, top.rank, top.activations_bytes,
                     top.total_bytes, top, tuple(ranks), ledger, host, tuple(rows),
                     host * node, stepped * node)


def _offload(model: ModelSpec, cfg: ParallelConfig, stages: list[StateBytes], heaviest: int):
    """(host bytes per GPU, host-link rows, parameters its host steps) of the config's CPU
    offload: the most any PP rank's GPU leaves its host; the traffic and the CPU step of
    the ``heaviest`` rank's GPU (the one the step waits for)."""
    if cfg.offload == "none" and not optim_offload.fraction(cfg):
        return 0.0, [], 0.0
    n = cfg.grad_replicas if cfg.hsdp_shard is None else cfg.hsdp_shard
    trained = [t / (n if cfg.zero_stage >= 1 else 1) for t in _trainable_by_rank(model, cfg)]
    if cfg.offload == "none":  # Megatron's hybrid-device optimizer (optim_offload)
        return (max(optim_offload.host_bytes(t, cfg) for t in trained),
                [offloading.HostTransfer(d, b, "no", what)
                 for d, b, what in optim_offload.rows(trained[heaviest], cfg)],
                optim_offload.fraction(cfg) * trained[heaviest])
    reduces, gathers = dp_collective_counts(cfg)
    host = max(offloading.host_bytes(s, t, cfg.offload) for s, t in zip(stages, trained))
    return (host, offloading.transfers(stages[heaviest], trained[heaviest], cfg.offload,
                                       reduces, gathers, cfg.num_microbatches,
                                       cfg.zero_stage), trained[heaviest])


def _trainable_by_rank(model: ModelSpec, cfg: ParallelConfig) -> list[float]:
    """Per PP rank, the trainable parameters on one GPU before ZeRO divides them."""
    if cfg.finetune is not None:
        return tuned.trainable_per_gpu(model, cfg)
    return [d + e for d, e in stage_params(model, cfg)]
