"""The ``Framework`` record: one training framework's conventions as fields (what each state
is kept in, when collectives run, what layers save, which buffers it allocates) and the
methods memory, comms and step read them through. ``ledger.frameworks.conventions`` holds one
record per framework.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.errors import LedgerError
from ledger.frameworks import fp8 as fp8_recipes
from ledger.frameworks.checkpoints import CheckpointFormat
from ledger.memory import PRECISIONS, StateBytes, optimizer_state_per_param


@dataclass(frozen=True, kw_only=True)
class Framework:
    """One framework's conventions. Bytes are per parameter or per element."""

    name: str
    summary: str
    # ---- resident state (bf16 mixed precision) --------------------------------------
    param_bytes: int  # the copy the GEMMs read, or for ZeRO-3 the sharded copy kept
    grad_bytes: int  # the gradient buffer that is accumulated and reduced
    master_bytes: int  # fp32 master weights held by the optimizer (0: the params are it)
    moment_bytes: int  # each optimizer moment
    gathered_param_bytes: int  # ZeRO-3: dtype of a layer's all-gathered params
    zero_stages: tuple[int, ...]  # sharding stages the framework offers
    # ---- when the data-parallel collectives run ---------------------------------------
    sharded_grads_per_microbatch: bool  # ZeRO-2/3 reduce-scatter after every backward
    reshard: str  # ZeRO-3 reshard after forward by default: "always" | "not_pp"
    unsharded_with_pp: bool  # with pp > 1 grads accumulate unsharded (torch pipelining)
    # ---- tensor, expert and pipeline parallel ---------------------------------------
    sp_regathers_input: bool  # SP saves the sequence shard, all-gathers it again in bwd
    moe_tokens_sp_shard: bool  # the MoE dispatcher sends the SP shard (s b / (tp cp))
    moe_dispatcher: str  # token dispatcher by default: "alltoall" | "allgather" | "flex"
    tied_embedding_allreduce: bool  # pp > 1: first and last stage all-reduce the grad
    schedules: tuple[str, ...]  # pipeline schedules it runs (ledger.pipeline.schedules.KINDS names)
    split_slack: int  # layer slots the embedding and the loss may take from the end stages
    even_split: bool  # interleaved: every virtual stage holds the same slots unless the
    #                   launch gives its own split; False: any split, the ends hold fewer
    split: str  # how layers fall on stages by default (ledger.placement.stages.SPLIT_RULES)
    # ---- what overlaps compute unless the launch says otherwise -------------------------
    overlap_grad_reduce: tuple[int, ...]  # ZeRO stages whose gradient reduction overlaps
    #                                       the backward by default
    overlap_param_gather: tuple[int, ...]  # ZeRO stages whose parameter gathers overlap
    #                                        compute by default
    overlap_fixed: tuple[int, ...]  # ZeRO stages whose DP overlap no launch can change
    dp_bucket_params: tuple[int, int]  # overlapped gradient bucket: fixed + per DP rank
    one_bucket_exposed: bool  # not overlapped, the gradients go in one call per buffer
    ep_overlap: bool  # EP all-to-alls hidden under another micro-batch's compute by default
    ep_overlap_schedules: tuple[str, ...]  # pipeline schedules it can overlap them in (and
    #                                        without a pipeline); () when it cannot
    overlap_p2p_schedules: tuple[str, ...] = ()  # schedules whose p2p overlaps compute by
    #                                              default (SOURCES["overlap_p2p"])
    # ---- memory beyond state and layer activations (docs/memory.md) -------------------
    version: str  # the code this record describes: the framework's and torch's commits
    activations: str  # saved-tensor table (ledger.arch.activations) its modules follow
    loss: str  # loss implementation by default (ledger.frameworks.losses)
    tp_loss: str  # the loss when the logits are split over TP
    compiled_loss: str | None  # the loss under --compile (None: compiling leaves it as is)
    dropout: float  # hidden and attention dropout by default
    pipeline_outputs: str  # stages that keep each micro-batch's output to the step's end
    #                        (ledger.pipeline.held.KEEP: none | last | all)
    pipeline_recv_buffers: bool  # a receive buffer per micro-batch, activations and their
    #                              gradients, allocated once and kept (torch pipelining)
    grads_persist: bool  # gradients allocated through the step (a persistent buffer);
    #                      False: created by the backward, freed by zero_grad(set_to_none)
    optimizer_temp_moments: int  # moment-sized copies alive during the optimizer step
    working_set: bool  # one layer's backward holds its recomputed tensors and gradients
    cp_buffers: str  # context parallelism's attention buffers (ledger.frameworks.cp)
    comm_bucket_bytes: float  # communication buckets the framework allocates per GPU
    fsdp_buffers: bool  # ZeRO-3 keeps the shard resident, gathered layers as buffers
    fsdp_prefetch_layers: int  # ZeRO-3: layers gathered beyond the one computing
    overhead_bytes: float  # CUDA context + NCCL communicators, per GPU, outside the
    #                        caching allocator (neither allocated nor reserved)
    fragmentation: float  # reserved / allocated - 1 at the peak, eager (benchmarks/fit_memory.py)
    compiled_fragmentation: float  # the same under torch.compile (fewer, fused temporaries)
    unreturnable: float = 0.0  # of allocated (at most the fragmentation share): the split
    #   blocks the caching allocator cannot hand back before it fails an allocation - what
    #   the verdict counts (ledger.placement.allocator.reclaimable); fitted on outcome rows
    #   (ran / out of memory) by benchmarks/fit_memory.py
    te_buffers: bool = False  # Transformer Engine's dummy wgrads and cuBLAS workspaces
    #                           (ledger.placement.buffers; SOURCES["te_buffers"])
    pipeline_input_grads: str = "none"  # which backwards leave the gradient of a stage's
    #   input on its receive buffer until the next step (ledger.pipeline.held.GRADS_KEPT:
    #   none | split - a split backward's input step only | all - every backward)
    fsdp_root_grads_held: bool = True  # ZeRO-3: the root unit's (embedding, output layer)
    #   unsharded gradients wait through the layers' backward for the root's own
    #   reduce-scatter; False: each is reduce-scattered as its module's backward ends
    fsdp_head_grads_held: bool = False  # ZeRO-3 without the above: the gradient bucket
    #   holding the output layer (with the final norm; with the embedding too where one
    #   bucket takes the whole root) stays allocated through the first layer's backward
    #   after it - freed when the next unit's reduce-scatter is queued (Megatron-FSDP)
    mtp_embedding: str = "none"  # pp > 1: a stage holding MTP modules but not the
    #   embedding builds its own copy of it (ledger.placement.stages.MTP_EMBEDDING):
    #   "stage" every such model chunk, "rank" unless its rank holds the first stage too
    #   (the copy shared there), "none" no MTP under a pipeline
    pipeline_inputs_kept: bool = False  # pp > 1: each model chunk past the first stage
    #   keeps its last micro-batch's received input and that input's gradient from the
    #   step's end to its next forward (ledger.placement.buffers.kept_input_tensors)
    fp32_grad_copy: bool = False  # the optimizer steps fp32 copies of a gradient buffer
    #   kept in another dtype, made at the step and freed by the next step's zero_grad
    #   (ledger.placement.buffers.fp32_grad_copies)
    grouped_gemm_fitted: bool = False  # its routed experts run as the rows the fitted
    #   grouped GEMM share was fitted on (Megatron-Core's TE GroupedLinear): their GEMMs
    #   at Calibration.grouped_gemm_share of the dense rate; else at the dense rate
    # ---- fine-tuning (``ledger.finetune``) -----------------------------------------------
    frozen_param_bytes: int = 2  # a frozen base parameter as the framework keeps it
    offloads: tuple[str, ...] = ()  # CPU offload it offers: "optimizer" (state, master and
    #   grads to the host, the step on the CPU), "params" (everything on the host)
    offload_stage: dict = None  # offload kind -> the ZeRO stages it runs under
    # ---- checkpoints (``ledger.frameworks.checkpoints``) ----------------------------------
    checkpoint: CheckpointFormat  # what a save writes, who writes it, what blocks
    # ---- FP8 / FP4 training (``ledger.frameworks.fp8``): None runs every GEMM in BF16 ----------
    fp8: fp8_recipes.Fp8Recipe | None = None

    @property
    def family(self) -> str:
        """The framework a versioned record belongs to: "torchtitan@2024-12" -> "torchtitan"."""
        return self.name.partition("@")[0]

    def state_per_param(self, zero_stage: int, optimizer: str = "adam",
                        factored_rate: float = 0.0, muon_share: float = 1.0) -> StateBytes:
        """(params, grads, optimizer) bytes of one parameter, before any sharding
        (``ledger.memory.OPTIMIZERS``; ``factored_rate``: Adafactor's row and column
        bytes per parameter of the model's matrices; ``muon_share``: the share Muon
        orthogonalises, ``ledger.optim.muon.managed_share``)."""
        optim = optimizer_state_per_param(optimizer, self.master_bytes, self.moment_bytes,
                                          factored_rate, muon_share)
        return StateBytes(self.param_bytes, self.grad_bytes,
                          int(optim) if optim == int(optim) else optim)

    def with_precision(self, precision: str | None) -> Framework:
        """The same framework run in an explicit precision (``ledger.memory.PRECISIONS``):
        every state, and the gathered params, in that precision's dtypes."""
        if precision is None:
            return self
        if fp8_recipes.is_low_precision(precision):
            return self.with_fp8(precision)
        if precision not in PRECISIONS:
            raise LedgerError("precision", f"unknown precision {precision!r}; "
                                           f"known: {', '.join([*PRECISIONS, 'fp8', 'fp4'])}")
        p = PRECISIONS[precision]
        return replace(self, param_bytes=p.param, grad_bytes=p.grad, master_bytes=p.master,
                       moment_bytes=p.moment, gathered_param_bytes=p.param,
                       frozen_param_bytes=p.param)

    def with_fp8(self, precision: str) -> Framework:
        """The framework's own state dtypes, its GEMMs in FP8 under the recipe
        ``precision`` names (``ledger.frameworks.fp8``): the recipe's optimizer moments, and its
        linear layers' saved inputs in the saved-tensor table ``<table>+fp8-<recipe>``."""
        rec = fp8_recipes.recipe(self.family, precision)
        moments = self.moment_bytes if rec.moment_bytes is None else rec.moment_bytes
        acts = self.activations if not rec.act_bytes else f"{self.activations}+fp8-{rec.name}"
        return replace(self, fp8=rec, moment_bytes=moments, activations=acts)

    def fp8_tp_gather_ratio(self) -> float:
        """SP all-gather bytes relative to BF16 (``ledger.frameworks.fp8.tp_gather_ratio``)."""
        return fp8_recipes.tp_gather_ratio(self)

    def fp8_gathered_param_ratio(self, model, zero3: bool = False) -> float:
        """Param all-gather bytes per param-state byte (``ledger.frameworks.fp8.gathered_param_ratio``)."""
        return fp8_recipes.gathered_param_ratio(model, self, zero3)

    def loss_for(self, tp: int, compile: bool) -> str:
        """The loss a run uses by default: compiled under --compile where the framework
        compiles it, else its TP loss when the logits are split over TP."""
        if compile and self.compiled_loss is not None:
            return self.compiled_loss
        return self.tp_loss if tp > 1 else self.loss

    def reshard_after_forward(self, pp: int) -> bool:
        return self.reshard == "always" or pp == 1

    def grad_accumulation(self, pp: int) -> str:
        """How ZeRO-2/3 accumulate gradients over micro-batches by default."""
        return "unsharded" if self.unsharded_with_pp and pp > 1 else "sharded"

    def pipeline_problem(self, layers: int, pp: int, vp: int, schedule: str,
                         own_split: bool = False) -> tuple[str, str] | None:
        """(field, why) this framework cannot run ``schedule`` with ``vp`` stages per rank
        over ``pp`` ranks of ``layers`` layers, or None when it can; ``own_split``: the
        launch gives its own layers per stage (Megatron's layout), checked elsewhere."""
        if pp == 1:
            return None
        if schedule not in self.schedules:
            return self.schedule_problem(schedule)
        if own_split:
            return None
        # DualPipe splits the model in pp stages, held twice; every other schedule in pp x vp
        stages, slack = (pp if schedule == "dualpipe" else pp * vp), self.split_slack
        if layers + slack < stages:
            return "layers", (f"layers({layers}) < pp({pp}) * vp({vp}) = {stages}: every "
                              f"virtual stage needs a layer"
                              + (f" (the embedding and the loss fill {slack})" if slack else ""))
        short = -layers % stages
        if self.even_split and vp > 1 and short > slack:  # one stage per rank: any split
            return "vp", (
                f"{self.name} splits layers({layers}) evenly over pp({pp}) * vp({vp}) = "
                f"{stages} virtual stages, the embedding and the loss taking at most {slack} "
                f"slots; this split leaves {short} empty (give its own split: "
                f"--pipeline-model-parallel-layout)")
        return None

    def schedule_problem(self, schedule: str) -> tuple[str, str] | None:
        """(field, why) this framework has no pipeline schedule ``schedule``, or None."""
        if schedule in self.schedules:
            return None
        return "schedule", (f"{self.name} runs the pipeline schedules "
                            f"{', '.join(self.schedules)}, not {schedule}; --framework "
                            f"ideal or torchtitan prices the others")

    def check_pipeline(self, layers: int, pp: int, vp: int, schedule: str,
                       own_split: bool = False) -> None:
        problem = self.pipeline_problem(layers, pp, vp, schedule, own_split)
        if problem is not None:
            raise LedgerError(*problem)

    def check_offload(self, offload: str, zero_stage: int) -> None:
        """Refuse a CPU offload the framework does not run at this ZeRO stage."""
        if offload == "none":
            return
        if offload not in self.offloads:
            offered = ", ".join(self.offloads) or "none"
            raise LedgerError("offload", f"{self.name} offloads {offered}, not {offload}")
        stages = self.offload_stage[offload]
        if zero_stage not in stages:
            raise LedgerError("offload", f"{self.name} offloads {offload} under zero stages "
                                         f"{', '.join(map(str, stages))}, got "
                                         f"zero_stage({zero_stage})")

    def overlaps(self, zero_stage: int, grad_reduce: bool | None,
                 param_gather: bool | None) -> tuple[bool, bool]:
        """(gradient reduction, parameter gather) overlapped at ``zero_stage``: the
        launch's choice where it makes one, else this framework's default; a choice the
        framework does not let a launch make is refused."""
        out = []
        for name, given, default in (("overlap_grad_reduce", grad_reduce,
                                      zero_stage in self.overlap_grad_reduce),
                                     ("overlap_param_gather", param_gather,
                                      zero_stage in self.overlap_param_gather)):
            if given is not None and given != default and zero_stage in self.overlap_fixed:
                raise LedgerError(name, f"{self.name} at zero stage {zero_stage} always "
                                        f"{'overlaps' if default else 'exposes'} it; got "
                                        f"{name}={given}")
            out.append(default if given is None else bool(given))
        if param_gather and zero_stage == 0 and zero_stage not in self.overlap_fixed:
            raise LedgerError("overlap_param_gather", "zero stage 0 gathers no parameters "
                                                      "(Megatron: --overlap-param-gather "
                                                      "needs the distributed optimizer)")
        if out[1] and not out[0]:
            raise LedgerError("overlap_param_gather", f"the parameter gather overlaps only "
                                                      f"with the gradient reduction "
                                                      f"overlapped too (zero stage "
                                                      f"{zero_stage}, {self.name})")
        return out[0], out[1]

    def ep_overlap_problem(self, schedule: str, pp: int) -> str | None:
        """Why this framework cannot hide EP all-to-alls under ``schedule``, or None."""
        where = self.ep_overlap_schedules
        if where and (schedule in where or pp == 1):
            return None
        if not where:
            return f"{self.name} does not overlap EP all-to-alls with compute"
        return (f"{self.name} overlaps EP all-to-alls in {', '.join(where)} only, not "
                f"{schedule}")

    def check_zero(self, zero_stage: int) -> None:
        if zero_stage not in self.zero_stages:
            raise LedgerError("zero_stage", f"{self.name} offers zero stages "
                                            f"{', '.join(map(str, self.zero_stages))}, got "
                                            f"{zero_stage}")
