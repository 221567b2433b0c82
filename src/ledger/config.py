"""ParallelConfig: how one run is placed - the axes, the sharding stage, the pipeline, the
framework convention it follows - and the MoE facts of the run (``MoESpec``).

A frozen input, checked at construction against what it names: its framework's stages
and defaults (``ledger.frameworks``), its pipeline schedule (``ledger.pipeline``), its
expert grid and dispatcher. Checks that need the model (divisibility of heads, layers)
are ``ledger.placement.per_gpu.validate``.

>>> cfg = ParallelConfig(tp=8, pp=4, dp=32, num_microbatches=16, vp=2)
>>> cfg.world, cfg.schedule, cfg.grad_replicas
(1024, 'interleaved', 32)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ledger.errors import LedgerError, require_positive
from ledger.finetune import FineTune
from ledger.frameworks import of as framework_of
from ledger.frameworks.dtypes import STATE_DTYPES
from ledger.frameworks.losses import loss as loss_of
from ledger.frameworks.host_checks import (  # noqa: F401
    EP_BACKENDS, GRAPH_SCOPES, check_host, ep_overlap_refusal)
from ledger.frameworks.offload_checks import OFFLOAD_MODULES, check_offloads  # noqa: F401
# Megatron-Core's selective recompute modules: those the ledger prices, the others it
# accepts as not priced, and Megatron's refusals
from ledger.frameworks.recompute_modules import (  # noqa: F401
    MEGATRON_RECOMPUTE_MODULES, RECOMPUTE_MODULES, UNPRICED_RECOMPUTE_MODULES, fp8_recipe_of,
    recompute_module_problems)
from ledger.pipeline import KINDS as SCHEDULES
from ledger.pipeline import check as check_schedule

RECOMPUTE = ("none", "selective", "full")
TWO_STAGES = ("zb-v", "dualpipe", "dualpipev")  # schedules holding 2 stages per rank
DISPATCHERS = ("alltoall", "allgather", "flex")
CP_KINDS = ("ring", "ulysses")
GRAD_ACCUMULATION = ("sharded", "unsharded")
OFFLOADS = ("none", "optimizer", "params")


def expert_tp(cfg):
    """Expert tensor parallel size: the config's ``etp``, or tp when unset (Megatron-LM
    arguments.py L587-588, parallel_state.py L871-872)."""
    etp = getattr(cfg, "etp", None)
    return cfg.tp if etp is None else etp


@dataclass(frozen=True)
class MoESpec:
    """MoE facts of a run (and of a model whose ModelSpec does not describe its experts).

    When the ModelSpec has experts, their share and top-k come from it and only
    ``capacity_factor`` and ``imbalance`` (run facts) are read from here.
    ``imbalance``: the busiest EP rank's routed rows / the mean (max load / mean load,
    >= 1; 1.0 = even routing, the default). It sets that rank's expert-side EP bytes and
    its expert activations - the rank whose memory peaks. A capacity factor other than 1
    pads (or drops) every expert to capacity x the even share, so the load no longer
    depends on the routing: the two are refused together.
    """

    num_experts: int = 1
    topk: int = 1
    expert_fraction: float = 0.0  # share of parameters living in routed experts
    capacity_factor: float = 1.0  # routed payload is padded to this x the even share
    imbalance: float = 1.0  # busiest EP rank's rows / the mean (dropless routing)
    # every expert's input padded to its capacity (Megatron
    # --moe-pad-expert-input-to-capacity): static shapes, so the host never waits for the
    # token counts (ledger.step.host); each expert gets exactly ceil(T k / E x factor) rows
    # whatever the routing (Megatron-LM d98e8a64 moe_utils.py L263, L1063-1075,
    # token_dispatcher.py L517-531): an imbalance is refused with it
    pad_to_capacity: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.expert_fraction <= 1.0:
            raise LedgerError("expert_fraction", f"must lie in [0, 1], "
                                                 f"got {self.expert_fraction}")
        if self.capacity_factor <= 0:
            raise LedgerError("capacity_factor", f"must be > 0, got {self.capacity_factor}")
        if not self.imbalance >= 1.0:
            raise LedgerError("imbalance", f"max load / mean load must be >= 1, got "
                                           f"{self.imbalance}")
        if self.imbalance != 1.0 and (self.capacity_factor != 1.0 or self.pad_to_capacity):
            why = "pad_to_capacity" if self.capacity_factor == 1.0 else \
                f"capacity_factor({self.capacity_factor})"
            raise LedgerError("imbalance", f"imbalance({self.imbalance}) with {why}: "
                                           f"capacity pads or drops every expert to the "
                                           f"same load; set one of them")

    @property
    def load_factor(self) -> float:
        """Rows the busiest EP rank's experts take / the even share (one of the two is 1)."""
        return self.capacity_factor * self.imbalance


def dispatcher(cfg) -> str:
    """The config's token dispatcher, or its framework's (``Framework.moe_dispatcher``)."""
    kind = getattr(cfg, "moe_dispatcher", None)
    if kind is None:
        kind = framework_of(cfg).moe_dispatcher
    return kind


def sp_shard_dispatch(cfg) -> bool:
    """The dispatcher starts from the SP shard (Megatron's, under SP)."""
    fw = framework_of(cfg)
    return bool(fw.moe_tokens_sp_shard and cfg.sequence_parallel)


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """One placement. world = tp x cp x pp x dp; the experts' grid ETP x EP x EDP tiles
    the tp x cp x dp ranks of each PP stage (``ledger.placement.layout``)."""

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
    vp_group: int | None = None  # its rounds' micro-batches (Megatron's group; None: pp)
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
    finetune: FineTune | None = None  # what trains (ledger.finetune); None: everything
    offload: str = "none"  # CPU offload: none | optimizer (ZeRO-Offload) | params (all state)
    # -- what a step keeps beyond its layers (ledger.placement.footprint) ----------------
    recompute_every: int = 1  # with recompute "full": every n-th layer is recomputed, the
    #   others keep everything (torchtitan's selective layer AC, selective_ac_option = n)
    # Megatron's selective recompute: the modules run again (--recompute-modules;
    # RECOMPUTE_MODULES); None: its default, core_attn
    recompute_modules: tuple[str, ...] | None = None
    # Megatron's full recompute of some layers: --recompute-method block recomputes the
    # first ``recompute_layers`` layers of each model chunk (None: all); uniform
    # checkpoints groups of ``recompute_group`` layers, keeping one input per group
    recompute_layers: int | None = None
    recompute_group: int = 1
    # Megatron's CPU activation offloading (--cpu-offloading-num-layers, TE's
    # get_cpu_offload_context): this many of the model's layers keep their activations on the host;
    # TE synchronises so the GPU holds (layers - n) layers' (cpu_offload.py L748-751 @TE d0067d0d)
    offload_activation_layers: int = 0
    # fine-grained activation offload: these modules' saved inputs on the host; () none
    # (ledger.placement.act_offload; checked in ledger.frameworks.offload_checks)
    offload_modules: tuple[str, ...] = ()
    activation_offload_fraction: float = 1.0
    dropout: float | None = None  # hidden and attention dropout; None: the framework's
    loss: str | None = None  # ledger.frameworks.losses; None: the framework's (compiled
    #   under ``compile`` where the framework compiles it)
    compile: bool = False  # torch.compile of the model (torchtitan --training.compile)
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a launch's environment): on a
    # failed allocation the caching allocator unmaps its segments' empty pages, so the
    # fragmentation is handed back (ledger.placement.allocator.reclaimable)
    expandable_segments: bool = False
    # Megatron's gradient-accumulation fusion (--no-gradient-accumulation-fusion, arguments.py
    # L2944 @d98e8a64): TE's dummy wgrads kept per weight shape (ledger.placement.buffers)
    grad_accumulation_fusion: bool = True
    cublas_workspace_bytes: int | None = None  # CUBLAS_WORKSPACE_CONFIG's (placement.buffers)
    te_layers: bool = True  # False: Megatron's --transformer-impl local (placement.buffers)
    # Megatron-FSDP's fsdp_double_buffer (set by nccl_ub): two layers' gathered params and
    # two layers' gradient buckets kept for the run (ledger.placement.buffers)
    fsdp_double_buffer: bool = False
    # DP traffic overlapped with compute (Megatron --overlap-grad-reduce / --overlap-param-gather,
    # DeepSpeed overlap_comm); None: the framework's default for the ZeRO stage (Framework.overlaps)
    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None
    # EP all-to-alls hidden under another micro-batch's compute (Megatron
    # --overlap-moe-expert-parallel-comm, DualPipe's forward-backward pairs); None: the
    # framework's default where its schedule allows it
    ep_overlap: bool | None = None
    # state dtypes a launch sets (frameworks.conventions.STATE_DTYPES; None: the framework's):
    # the gradient buffer (Megatron --grad-reduce-in-bf16), the main params and Adam's moments
    # (--use-precision-aware-optimizer --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype)
    grad_dtype: str | None = None
    master_dtype: str | None = None
    exp_avg_dtype: str | None = None
    exp_avg_sq_dtype: str | None = None
    # transformer layers per model stage (Megatron --decoder-first/last-pipeline-num-layers
    # or --pipeline-model-parallel-layout); None: the framework's rule (Framework.split)
    stage_layers: tuple[int, ...] | None = None
    # -- what the host launches, and what overlaps the pipeline's sends (ledger.step.host) --
    cuda_graph: tuple[str, ...] = ()  # blocks captured in CUDA graphs (GRAPH_SCOPES); () eager
    cuda_graph_local: bool = False  # Megatron's own graphs (--cuda-graph-impl local), not TE's
    # pipeline sends and receives overlapped with the next chunk's compute
    overlap_p2p: bool | None = None  # Megatron's overlap_p2p_comm; None: the framework's default
    ep_backend: str | None = None  # the flex dispatcher's kernels; None: deepep (Megatron's)
    ep_sms: int | None = None  # its SMs (--moe-flex-dispatcher-num-sms); None: step.ep_sms's
    hybridep_permute_fusion: bool = False  # --moe-permute-fusion-into-hybridep (step.eager)
    # NCCL_NVLS_ENABLE: None NCCL's default (NVLS where the switches multicast), False off
    # (Megatron-Bridge's launcher); sizes NCCL's NVLS buffers (ledger.placement.nccl_buffers)
    nccl_nvls: bool | None = None
    # Megatron's optimizer CPU offload: this share on the host, its copies overlapped with
    # the CPU step or not (ledger.placement.optim_offload)
    optimizer_offload_fraction: float = 0.0
    overlap_cpu_optimizer: bool = False
    # the shared experts on their own stream beside the dispatcher's all-to-alls (Megatron
    # --moe-shared-expert-overlap, off by default: transformer_config.py L717 @d98e8a64;
    # alltoall / flex only, not with the combined 1F1B, L1820-1825, L3040-3041)
    shared_expert_overlap: bool = False
    # the combined 1F1B's expert weight gradients run apart, under the backward's dispatch
    # (Megatron --delay-wgrad-compute, off by default: distributed_data_parallel_config.py
    # L185; needs --overlap-moe-expert-parallel-comm, transformer_config.py L3074-3077)
    delay_wgrad: bool = False
    # the attention core's QK^T and PV in FP8 (Megatron-Core's TransformerConfig
    # fp8_dot_product_attention, transformer_config.py L640 @d98e8a64, no CLI flag there,
    # set by Megatron-Bridge's recipes; TE's recipe fp8_dpa under the delayed, tensorwise
    # and mxfp8 recipes, fp8_utils.py L777-788; TE "performs attention in FP8",
    # recipe/__init__.py L222-227 @d0067d0d): timed at the FP8 peak
    # (ledger.step.layer_time.attention_peak); under BF16 or another recipe it changes
    # nothing. Its kernel keeps q, k, v in FP8 (ledger.frameworks.fp8_attention)
    fp8_attention: bool = False
    fp8_output_proj: bool = False  # the LM head in MXFP8 (ledger.frameworks.fp8_head)
    # the experts as Megatron's TE op fuser with TE's CuTe DSL kernels, and its dGLU + dbias
    # kernel as cuDNN frontend 1.24-1.25 ran it (cudnn-frontend#256): ledger.step.eager
    fused_grouped_mlp: bool = False
    dglu_dbias_regression: bool = False
    # parameters per DP gradient bucket (Megatron --ddp-bucket-size; None: the framework's,
    # Megatron max(40M, 1M x dp): training.py L2179-2194 @d98e8a64)
    dp_bucket_params: int | None = None
    wgrad_deferral: int | None = None  # --defer-embedding-wgrad-compute's limit (0 all; None off)
    indexer_loss: str = "none"  # DeepSeek-V4's indexer KL loss (ledger.frameworks.dsa_loss)
    paged_stash: tuple | None = None  # MoE paged stash (ledger.frameworks.paged_stash)

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "num_microbatches", "vp",
                  "act_bytes"):
            require_positive(f, getattr(self, f))
        if isinstance(self.zero_stage, bool) or self.zero_stage not in (0, 1, 2, 3):
            raise LedgerError("zero_stage", f"must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        _check_dtypes(self)
        fw = framework_of(self)
        fw.check_zero(self.zero_stage)
        if self.offload not in OFFLOADS:
            raise LedgerError("offload", f"must be one of {', '.join(OFFLOADS)}, got {self.offload!r}")
        fw.check_offload(self.offload, self.zero_stage)
        if self.finetune is not None and fw.fp8 is not None:
            raise LedgerError("finetune", "fine-tuning is priced with BF16 GEMMs; drop "
                                          "--precision fp8")
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
        check_config(self)  # the expert grid and the dispatcher
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
        if self.schedule in TWO_STAGES and self.vp != 2:  # a V, or DualPipe's two copies
            raise LedgerError("vp", f"{self.schedule} holds 2 stages per rank, got "
                                    f"vp({self.vp})")
        if self.pp > 1:
            check_schedule(self.schedule, self.pp, self.num_microbatches, self.vp, self.vp_group)
        check_step(self, fw)
        grad, param = fw.overlaps(self.zero_stage, self.overlap_grad_reduce,
                                  self.overlap_param_gather)
        object.__setattr__(self, "overlap_grad_reduce", grad)
        object.__setattr__(self, "overlap_param_gather", param)
        object.__setattr__(self, "ep_overlap", _ep_overlap(self, fw))
        if self.stage_layers is not None:
            object.__setattr__(self, "stage_layers", tuple(self.stage_layers))
        check_host(self, fw)

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def grad_replicas(self) -> int:
        """Ranks holding a replica of the same parameter shard: dp x cp (Megatron)."""
        return self.dp * self.cp


def check_step(cfg, fw) -> None:
    """Recompute frequency, dropout and loss: checked, and the framework's defaults
    filled in (dropout, and the loss - its compiled one under ``compile``)."""
    require_positive("recompute_every", cfg.recompute_every)
    if cfg.recompute_every > 1 and cfg.recompute != "full":
        raise LedgerError("recompute_every", f"recomputes every n-th layer in full: needs "
                                             f"recompute full, got recompute "
                                             f"{cfg.recompute!r}")
    _check_recompute_modules(cfg, fw)
    if cfg.dropout is None:
        object.__setattr__(cfg, "dropout", fw.dropout)
    if not 0.0 <= cfg.dropout < 1.0:
        raise LedgerError("dropout", f"must lie in [0, 1), got {cfg.dropout}")
    if cfg.loss is None:
        object.__setattr__(cfg, "loss", fw.loss_for(cfg.tp, cfg.compile))
    loss_of(cfg.loss)
def _check_dtypes(cfg) -> None:
    for f in ("grad_dtype", "master_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        v = getattr(cfg, f)
        if v is not None and v not in STATE_DTYPES:
            raise LedgerError(f, f"must be one of {', '.join(STATE_DTYPES)}, got {v!r}")


def _check_recompute_modules(cfg, fw) -> None:
    """--recompute-modules and the partial full recompute, as Megatron checks them
    (transformer_config.py L1943-1962, L2000-2006, L2024-2035 @d98e8a64; arguments.py: the
    method and layer count go with full recompute only)."""
    mods = cfg.recompute_modules
    if mods is not None:
        object.__setattr__(cfg, "recompute_modules", tuple(mods))
        for field, problem in recompute_module_problems(cfg.recompute_modules, None, None,
                                                        fp8_recipe=fp8_recipe_of(fw)):
            raise LedgerError(field, problem)  # the model's half: placement.experts
        if cfg.recompute != "selective":
            raise LedgerError("recompute_modules", f"modules are recomputed under "
                                                   f"recompute selective, got recompute "
                                                   f"{cfg.recompute!r}")
    require_positive("recompute_group", cfg.recompute_group)
    n = cfg.offload_activation_layers
    if n and (n < 0 or cfg.pp > 1 or cfg.recompute != "none"):
        raise LedgerError("offload_activation_layers", f"Megatron offloads the activations of "
                          f"0 <= n layers without pipeline parallelism or recompute "
                          f"(transformer_config.py L1884-1899 @d98e8a64), got {n} with "
                          f"pp({cfg.pp}) recompute {cfg.recompute!r}")
    if cfg.recompute_layers is not None:
        require_positive("recompute_layers", cfg.recompute_layers)
    if (cfg.recompute_layers is not None or cfg.recompute_group > 1) and \
            cfg.recompute != "full":
        raise LedgerError("recompute_layers", f"a partial or grouped recompute is of whole "
                                              f"layers: needs recompute full, got "
                                              f"{cfg.recompute!r}")


def _ep_overlap(cfg, fw) -> bool:
    """The config's EP overlap: as given where its framework, schedule and run allow it
    (Megatron-LM transformer_config.py L3002-3046: EP > 1, the alltoall or flex
    dispatcher, no full recompute), else the framework's default where it applies."""
    if cfg.ep_overlap is None:
        return bool(fw.ep_overlap and fw.ep_overlap_problem(cfg.schedule, cfg.pp) is None
                    and cfg.ep > 1)
    if not cfg.ep_overlap:
        return False
    problem = ep_overlap_refusal(fw, cfg.schedule, cfg.pp, cfg.ep, cfg.recompute,
                                 dispatcher(cfg))
    if problem is not None:
        raise LedgerError("ep_overlap", problem)
    return True


def check_config(cfg) -> None:
    """The expert grid and dispatcher of a ParallelConfig; one line per refusal."""
    etp = expert_tp(cfg)
    require_positive("etp", etp)
    stage = cfg.tp * cfg.cp * cfg.dp
    if etp == cfg.tp and (cfg.dp * cfg.cp) % cfg.ep:
        raise LedgerError("ep", f"ep({cfg.ep}) does not divide dp({cfg.dp}) * "
                                f"cp({cfg.cp}) = {cfg.dp * cfg.cp}")
    if stage % (etp * cfg.ep):
        raise LedgerError("etp", f"etp({etp}) * ep({cfg.ep}) does not divide tp({cfg.tp}) * "
                                 f"cp({cfg.cp}) * dp({cfg.dp}) = {stage} (the expert grid "
                                 f"tiles one PP stage)")
    kind = dispatcher(cfg)
    if kind not in DISPATCHERS:
        raise LedgerError("moe_dispatcher", f"must be one of {', '.join(DISPATCHERS)}, "
                                            f"got {kind!r}")
    if etp != cfg.tp and not sp_shard_dispatch(cfg):
        raise LedgerError("etp", f"etp({etp}) != tp({cfg.tp}) needs a dispatcher that starts "
                                 f"from the SP shard (framework megatron with sequence "
                                 f"parallelism), got {cfg.framework} sp={cfg.sequence_parallel}")
    if kind == "flex" and etp > 1:
        raise LedgerError("etp", f"the flex (DeepEP) dispatcher is modelled at etp 1 only, "
                                 f"got etp({etp})")
