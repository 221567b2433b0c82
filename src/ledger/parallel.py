"""Parallelism as state placement: per-GPU state, per-step communication, pipeline bubble.

Input: a ModelSpec, its whole-model StateBytes and a ParallelConfig. Output: a
Placement with the bytes each GPU holds and, per axis and collective, the bytes
each GPU sends in one training step. No torch.

``python -m ledger.parallel`` prints the seed's six placements.

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

from dataclasses import dataclass, field, replace

import numpy as np

from ledger.errors import LedgerError, require_divides, require_positive
from ledger.comms import (  # noqa: F401  (re-exported: the seed's names live here too)
    RING_BLOCKS_PER_STEP,
    Comm,
    cp_comms,
    dp_comms,
    dp_group_comms,
    ep_comms,
    expert_fraction,
    framework_of,
    pp_comms,
    ring_kv_block_bytes,
    tied_embedding_comms,
    tp_comms,
)
from ledger.comms_ep import MoESpec, check_config, check_model  # noqa: F401  (MoESpec lives here)
from ledger.footprint import (MemoryBreakdown, buffer_bytes, logits_bytes, overhead_bytes,
                              shard_state)
from ledger.fp8 import with_weights as with_fp8_weights
from ledger.layout import DEFAULT_ORDER, Layout, expert_tp
from ledger.memory import RECOMPUTE, StateBytes
from ledger.activations import kind_counts, layer_activations
from ledger.saved_tensors import table as saved_table
from ledger.model import ModelSpec
from ledger.pipeline import placement_pipeline
from ledger.schedules import KINDS as SCHEDULES
from ledger.schedules import check as check_schedule
from ledger.stages import rank_layers, rank_stages, stage_layers, stage_params, stage_starts

CP_KINDS = ("ring", "ulysses")
GRAD_ACCUMULATION = ("sharded", "unsharded")


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """One placement. world = tp x cp x pp x dp; the experts' grid ETP x EP x EDP tiles
    the tp x cp x dp ranks of each PP stage (``ledger.layout``)."""

    tp: int = 1  # tensor parallel: splits every matrix of a layer
    pp: int = 1  # pipeline parallel: splits the layers
    dp: int = 1  # data parallel replicas
    cp: int = 1  # context parallel: splits the sequence
    ep: int = 1  # expert parallel: splits the routed experts (inside tp x cp x dp / etp)
    etp: int | None = None  # expert tensor parallel; None: tp (Megatron arguments.py L587-588)
    moe_dispatcher: str | None = None  # alltoall | allgather | flex; None: the framework's
    zero_stage: int = 0  # 0 = DDP, 1/2/3 = ZeRO-1/2/3 (3 == FSDP)
    sequence_parallel: bool = True  # Megatron SP inside the TP group
    cp_kind: str = "ring"  # "ring" | "ulysses"
    reshard_after_forward: bool | None = None  # ZeRO-3 only; None: the framework's default
    hsdp_shard: int | None = None  # HSDP: shard group size (None = shard over dp x cp)
    micro_batch: int = 1  # sequences per micro-batch
    num_microbatches: int = 1  # micro-batches per step per pipeline
    vp: int = 1  # virtual stages per PP rank (interleaved 1F1B)
    act_bytes: int = 2  # bf16 activations on the wire
    moe: MoESpec = field(default_factory=MoESpec)
    schedule: str | None = None  # pipeline schedule; None: 1f1b, or interleaved when vp > 1
    recompute: str = "none"  # activation recompute: none | selective | full
    flash_attention: bool = True  # False: attention scores are materialised (pre-2022 kernels)
    framework: str = "megatron"  # the convention the run follows (ledger.frameworks)
    precision: str | None = None  # None: the framework's dtypes; else ledger.memory.PRECISIONS
    # ZeRO-2/3 over micro-batches: "sharded" reduce-scatters after every backward and keeps
    # grads sharded; "unsharded" accumulates the full gradient and reduces once per step
    # (and keeps ZeRO-3 params gathered after each backward); None: the framework's default
    grad_accumulation: str | None = None

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "num_microbatches", "vp",
                  "act_bytes"):
            require_positive(f, getattr(self, f))
        if isinstance(self.zero_stage, bool) or self.zero_stage not in (0, 1, 2, 3):
            raise LedgerError("zero_stage", f"must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        fw = framework_of(self)
        fw.check_zero(self.zero_stage)
        if self.reshard_after_forward is None:
            object.__setattr__(self, "reshard_after_forward", fw.reshard_after_forward(self.pp))
        if self.grad_accumulation is None:
            object.__setattr__(self, "grad_accumulation", fw.grad_accumulation(self.pp))
        if self.grad_accumulation not in GRAD_ACCUMULATION:
            raise LedgerError("grad_accumulation", f"must be one of "
                                                   f"{', '.join(GRAD_ACCUMULATION)}, got "
                                                   f"{self.grad_accumulation!r}")
        if self.cp_kind not in CP_KINDS:
            raise LedgerError("cp_kind", f"must be ring or ulysses, got {self.cp_kind!r}")
        replicas = self.dp * self.cp
        if self.hsdp_shard is not None:
            require_positive("hsdp_shard", self.hsdp_shard)
            if self.zero_stage == 0:
                raise LedgerError("hsdp_shard", f"HSDP shards state, so it needs zero_stage "
                                                f">= 1, got zero_stage({self.zero_stage})")
            if replicas % self.hsdp_shard:
                raise LedgerError("hsdp_shard", f"hsdp_shard({self.hsdp_shard}) does not "
                                                f"divide dp({self.dp}) * cp({self.cp}) = {replicas}")
        check_config(self)  # the expert grid and the dispatcher (ledger.comms_ep)
        if self.recompute not in RECOMPUTE:
            raise LedgerError("recompute", f"must be one of {', '.join(RECOMPUTE)}, "
                                           f"got {self.recompute!r}")
        if self.schedule is None:
            object.__setattr__(self, "schedule", "interleaved" if self.vp > 1 else "1f1b")
        if self.schedule not in SCHEDULES:
            raise LedgerError("schedule", f"unknown schedule {self.schedule!r}; known: "
                                          f"{', '.join(SCHEDULES)}")
        if self.vp > 1 and self.pp == 1:
            raise LedgerError("vp", f"virtual stages need pp > 1, got vp({self.vp}) pp(1)")
        if self.schedule == "zb-v" and self.vp != 2:  # its V: stages r and 2pp-1-r
            raise LedgerError("vp", f"zb-v holds 2 stages per rank, got vp({self.vp})")
        if self.pp > 1:
            check_schedule(self.schedule, self.pp, self.num_microbatches, self.vp)

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def grad_replicas(self) -> int:
        """Ranks holding a replica of the same parameter shard: dp x cp (Megatron)."""
        return self.dp * self.cp


def validate(model: ModelSpec, cfg: ParallelConfig) -> None:
    """Refuse a config this model cannot run with; each message shows the numbers."""
    require_divides("heads", model.heads, "tp", cfg.tp)
    require_divides("kv_heads", model.kv_heads, "tp", cfg.tp)
    require_divides("ffn_hidden", model.ffn_hidden, "tp", cfg.tp)
    if cfg.cp_kind == "ulysses" and cfg.cp > 1:
        require_divides("heads", model.heads, "tp*cp", cfg.tp * cfg.cp)
        require_divides("kv_heads", model.kv_heads, "tp*cp", cfg.tp * cfg.cp)
    framework_of(cfg).check_pipeline(model.layers, cfg.pp, cfg.vp, cfg.schedule)
    if cfg.cp > 1:  # ring balances causal work over 2*cp chunks (head-tail pairing)
        chunks = 2 * cfg.cp if cfg.cp_kind == "ring" else cfg.cp
        require_divides("seq_len", model.seq_len, "2*cp" if chunks > cfg.cp else "cp", chunks)
    check_model(model, cfg)


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

    def total_bytes(self, axis: str | None = None) -> float:
        return sum(c.bytes for c in self.comms if axis is None or c.axis == axis)

    def by_kind(self) -> dict[str, float]:
        return _sum_by(self.comms, "kind")

    def by_link(self) -> dict[str, float]:
        return {"nvlink": 0.0, "ib": 0.0} | _sum_by(self.comms, "link")


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


def layer_activation_bytes(model: ModelSpec, cfg, kind=None, flash=None, recompute=None):
    """One layer's saved bytes (``ledger.activations``) as the config's framework keeps
    them: Korthikanti's GPT accounting under ``ideal`` (the seed's figure), the tensors
    its own modules save otherwise. ``kind``: (MoE?, window) of the layer, else the
    model's typical layer."""
    moe, window = kind if kind is not None else (None, None)
    return layer_activations(
        model, micro_batch=cfg.micro_batch, tp=cfg.tp, cp=cfg.cp,
        sequence_parallel=cfg.sequence_parallel,
        flash=cfg.flash_attention if flash is None else flash,
        recompute=cfg.recompute if recompute is None else recompute, act_bytes=cfg.act_bytes,
        capacity_factor=cfg.moe.load_factor, table=saved_table(framework_of(cfg).activations),
        etp=expert_tp(cfg),
        moe=moe, window=window).total_bytes


def activation_bytes_per_layer(model: ModelSpec, cfg: ParallelConfig,
                               flash: bool | None = None, recompute: str | None = None) -> float:
    """Bytes one layer saves for backward for this placement, averaged over the model's
    layers (dense and MoE, local and global ones differ); the config's attention kernel
    and recompute mode unless given."""
    kinds, counts = layer_kinds(model, 1, 1, False)
    return sum(n * layer_activation_bytes(model, cfg, k, flash, recompute)
               for k, n in zip(kinds, counts[0])) / model.layers


def layer_kinds(model: ModelSpec, pp: int, vp: int = 1, v_shape: bool = False):
    """The distinct kinds of layer (MoE?, window) and, per PP rank, how many of each it
    holds: a stage's activations are priced once per kind (numbers or arrays alike)."""
    counts = stage_layers(model.layers, pp * vp)
    starts = stage_starts(counts)
    per_stage = [kind_counts(model, range(starts[st], starts[st] + counts[st]))
                 for st in range(pp * vp)]
    mtp_kind = (model.is_moe, None)  # an MTP module's block: a global-attention MoE layer
    kinds = sorted({k for c in per_stage for k in c} | ({mtp_kind} if model.mtp_layers else set()),
                   key=lambda k: (k[0], k[1] or 0))
    table = np.zeros((pp, len(kinds)))
    for r, held in enumerate(rank_stages(pp, vp, v_shape)):
        for st in held:
            for kind, n in per_stage[st].items():
                table[r, kinds.index(kind)] += n
            if st == pp * vp - 1:  # the MTP modules run beside the output head
                table[r, kinds.index(mtp_kind)] += model.mtp_layers
    return kinds, table


def pp_bubble_fraction(p: int, m: int, vp: int = 1) -> float:
    """Idle share of a GPipe / 1F1B step: (p-1) fill-and-drain slots against m useful
    ones; interleaving shrinks each slot to 1/vp.

    >>> round(pp_bubble_fraction(16, 16), 3), round(pp_bubble_fraction(4, 8), 4)
    (0.484, 0.2727)
    """
    if p <= 1:
        return 0.0
    bubble = (p - 1) / vp
    return bubble / (m + bubble)


def resident_state(model: ModelSpec, cfg: ParallelConfig, optimizer: str = "adam") -> StateBytes:
    """Whole-model state in the framework's dtypes (or the config's explicit precision)."""
    return framework_of(cfg).state_per_param(cfg.zero_stage, optimizer).scaled(model.params)


def largest_unit_params(model: ModelSpec, cfg: ParallelConfig) -> float:
    """Parameters on one GPU of the largest unit ZeRO-3 gathers at once: a layer (its
    tp share, its experts' tp x ep share) or the embedding / output matrix."""
    kinds = ([True] if model.is_moe else []) + ([False] if model.moe_layers < model.layers
                                                 else [])
    units = [split / cfg.tp + repl + routed / (expert_tp(cfg) * cfg.ep)
             for split, repl, routed in (model.layer_params(moe) for moe in kinds)]
    return max(units + [model.vocab * model.hidden / cfg.tp])


def memory_by_rank(model: ModelSpec, cfg: ParallelConfig, st: StateBytes,
                   inflight: tuple[float, ...]) -> list[MemoryBreakdown]:
    """Every pipeline rank's peak memory by cause (``ledger.footprint``)."""
    fw = framework_of(cfg)
    per_param = st.scaled(1 / model.params)
    vshape = cfg.schedule == "zb-v"
    held = rank_layers(model.layers, cfg.pp, cfg.vp, vshape)
    out_rank = 0 if vshape else cfg.pp - 1  # the rank with the output layer
    kinds, counts = layer_kinds(model, cfg.pp, cfg.vp, vshape)
    per_kind = [layer_activation_bytes(model, cfg, k) for k in kinds]
    working = max(layer_activation_bytes(model, cfg, k, recompute="none") for k in kinds) \
        if cfg.recompute == "full" else 0.0
    unit = largest_unit_params(model, cfg)
    out = []
    for r, (dense, expert) in enumerate(stage_params(model, cfg)):
        state = with_fp8_weights(shard_state(per_param.scaled(dense), per_param.scaled(expert),
                                             cfg, fw), model, cfg, fw, counts[r], kinds)
        alive = inflight[min(r, len(inflight) - 1)]
        acts = sum(n * a for n, a in zip(counts[r], per_kind)) * alive
        logits = logits_bytes(model, cfg, fw) * alive * (r == out_rank)
        buffers = float(buffer_bytes(cfg, fw, unit, held[r], working))
        allocated = state.total_bytes + acts + logits + buffers
        out.append(MemoryBreakdown(r, state.total_bytes, acts, logits, buffers,
                                   overhead_bytes(fw, allocated)))
    return out


def place(model: ModelSpec, *args, precision: str | None = None, optimizer: str = "adam",
          gpus_per_node: int = 8, order: str = DEFAULT_ORDER) -> Placement:
    """The ledger of one placement: ``place(model, cfg)`` (state in the config's framework
    dtypes, or an explicit ``precision``) or the seed's ``place(model, state_bytes, cfg)``.
    Links come from the rank layout."""
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
                 hsdp_shard=cfg.hsdp_shard, order=order, gpus_per_node=gpus_per_node)
    layers = model.layers / cfg.pp
    tokens = model.seq_len * cfg.micro_batch // cfg.cp  # per GPU per micro-batch
    s_act = tokens * model.hidden * cfg.act_bytes  # one activation tensor
    comms = [c for c in tp_comms(cfg, s_act, layers, lay.link("tp"))
             + cp_comms(model, cfg, tokens, layers, lay.link("cp"))
             + pp_comms(cfg, s_act, lay.link("pp"))
             + tied_embedding_comms(model, cfg, st, lay.link("pp"))
             + dp_comms(model, st, cfg, lay)
             + ep_comms(model, cfg, tokens, lay) if c.bytes > 0]
    fw, per_param = framework_of(cfg), st.scaled(1 / model.params)
    kinds, counts = layer_kinds(model, cfg.pp, cfg.vp, cfg.schedule == "zb-v")
    stages = [with_fp8_weights(shard_state(per_param.scaled(d), per_param.scaled(e), cfg, fw),
                               model, cfg, fw, counts[r], kinds)
              for r, (d, e) in enumerate(stage_params(model, cfg))]
    heaviest = max(range(cfg.pp), key=lambda r: stages[r].total_bytes)
    bubble, inflight = 0.0, (1.0,)  # without a pipeline one micro-batch is alive at a time
    if cfg.pp > 1:
        bubble, inflight = placement_pipeline(cfg.schedule, cfg.pp, cfg.num_microbatches,
                                              cfg.vp)
    ranks = memory_by_rank(model, cfg, st, inflight)
    top = max(ranks, key=lambda m: m.total_bytes)
    even = with_fp8_weights(per_gpu_state(model, st, cfg), model, cfg, fw,  # + FP8 copies
                            counts.sum(axis=0) / cfg.pp, kinds)
    return Placement(even, comms, bubble, tokens,
                     activation_bytes_per_layer(model, cfg), layers, stages[heaviest],
                     heaviest, cfg.world, inflight, top.rank, top.activations_bytes,
                     top.total_bytes, top, tuple(ranks))


def seed_placements() -> list[tuple[ModelSpec, ParallelConfig]]:
    """The seed's six placements: Llama 3 405B three ways, 70B three ways."""
    from ledger.model import llama3_405b, llama3_70b

    m405, m70 = llama3_405b(), llama3_70b()
    seed = dict(framework="ideal")  # the seed's accounting (ledger.frameworks)
    return [
        # Llama 3 405B on 16K GPUs at s = 8192 (Llama 3 paper, Table 5)
        (m405, ParallelConfig(tp=8, cp=1, pp=16, dp=128, zero_stage=1, num_microbatches=16, **seed)),
        # its long-context stage, s = 131072
        (m405.with_seq(131072), ParallelConfig(tp=8, cp=16, pp=16, dp=4, zero_stage=1,
                                               num_microbatches=32, **seed)),
        # the same model on pure ZeRO-3 / FSDP
        (m405, ParallelConfig(dp=16384, zero_stage=3, **seed)),
        # 70B on 1024 GPUs: TP x PP, TP x PP interleaved, HSDP with 64-GPU shard groups
        (m70, ParallelConfig(tp=8, pp=8, dp=16, zero_stage=1, num_microbatches=32, **seed)),
        (m70, ParallelConfig(tp=8, pp=4, dp=32, zero_stage=1, num_microbatches=16, vp=2, **seed)),
        (m70, ParallelConfig(dp=1024, zero_stage=3, hsdp_shard=64, **seed)),
    ]


if __name__ == "__main__":
    # Run as a script, hand over to ``python -m ledger`` (the seed's report by default):
    # the library module itself never imports the CLI above it.
    import runpy

    runpy.run_module("ledger", run_name="__main__")
