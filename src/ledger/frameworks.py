"""Framework conventions: what each training framework really keeps and sends, as data.

The same placement costs different bytes under Megatron-Core, torchtitan (FSDP2),
DeepSpeed or Hugging Face modules: which dtype each state is kept in, whether sharded
gradients are reduced after every micro-batch or once per step, whether sequence
parallelism re-gathers its input in the backward, how many tokens the MoE dispatcher
sends, what the loss keeps of the logits, which buffers the framework allocates. Each
framework is one ``Framework`` record below; every fact carries its source in
``SOURCES``. ``ideal`` is the seed's accounting (the ZeRO paper's 2 + 2 + 12 bytes per
parameter, one sharded collective per step, gathered-input SP, nothing but state and
activations in memory) and stays reproducible figure for figure.

Nothing outside this module branches on a framework's name: memory, comms and step read
the fields.

>>> get("megatron").state_per_param(1).total_bytes, get("ideal").state_per_param(1).total_bytes
(18, 16)
>>> get("torchtitan").reshard_after_forward(pp=1), get("torchtitan").reshard_after_forward(pp=4)
(True, False)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger import fp8 as fp8_recipes
from ledger.errors import LedgerError
from ledger.memory import OPTIMIZER_MOMENTS, PRECISIONS, StateBytes

GiB = 2**30
MiB = 2**20


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
    # ---- memory beyond state and layer activations ------------------------------------
    activations: str  # saved-tensor table (ledger.activations) its modules follow
    logits_bytes: float  # bytes per logit element the loss keeps (+ its gradient)
    comm_bucket_bytes: float  # communication buckets the framework allocates per GPU
    fsdp_buffers: bool  # ZeRO-3 keeps the shard resident, gathered layers as buffers
    fsdp_prefetch_layers: int  # ZeRO-3: layers gathered beyond the one computing
    overhead_bytes: float  # CUDA context + NCCL communicators, per GPU
    fragmentation: float  # caching-allocator slack, as a share of what is allocated
    # ---- FP8 training (``ledger.fp8``): None runs every GEMM in BF16 ------------------
    fp8: fp8_recipes.Fp8Recipe | None = None

    def state_per_param(self, zero_stage: int, optimizer: str = "adam") -> StateBytes:
        """(params, grads, optimizer) bytes of one parameter, before any sharding."""
        if optimizer not in OPTIMIZER_MOMENTS:
            raise LedgerError("optimizer", f"unknown optimizer {optimizer!r}; "
                                           f"known: {', '.join(OPTIMIZER_MOMENTS)}")
        moments = OPTIMIZER_MOMENTS[optimizer] * self.moment_bytes
        return StateBytes(self.param_bytes, self.grad_bytes, self.master_bytes + moments)

    def with_precision(self, precision: str | None) -> Framework:
        """The same framework run in an explicit precision (``ledger.memory.PRECISIONS``):
        every state, and the gathered params, in that precision's dtypes."""
        if precision is None:
            return self
        if fp8_recipes.is_fp8(precision):
            return self.with_fp8(precision)
        if precision not in PRECISIONS:
            raise LedgerError("precision", f"unknown precision {precision!r}; "
                                           f"known: {', '.join([*PRECISIONS, 'fp8'])}")
        p = PRECISIONS[precision]
        return replace(self, param_bytes=p.param, grad_bytes=p.grad, master_bytes=p.master,
                       moment_bytes=p.moment, gathered_param_bytes=p.param)

    def with_fp8(self, precision: str) -> Framework:
        """The framework's own state dtypes, its GEMMs in FP8 under the recipe
        ``precision`` names (``ledger.fp8``): the recipe's optimizer moments, and its
        linear layers' saved inputs in the saved-tensor table ``<table>+fp8-<recipe>``."""
        rec = fp8_recipes.recipe(self.name, precision)
        moments = self.moment_bytes if rec.moment_bytes is None else rec.moment_bytes
        acts = self.activations if not rec.act_bytes else f"{self.activations}+fp8-{rec.name}"
        return replace(self, fp8=rec, moment_bytes=moments, activations=acts)

    def fp8_tp_gather_ratio(self) -> float:
        """SP all-gather bytes relative to BF16 (``ledger.fp8.tp_gather_ratio``)."""
        return fp8_recipes.tp_gather_ratio(self)

    def fp8_gathered_param_ratio(self, model) -> float:
        """Param all-gather bytes per param-state byte (``ledger.fp8.gathered_param_ratio``)."""
        return fp8_recipes.gathered_param_ratio(model, self)

    def reshard_after_forward(self, pp: int) -> bool:
        return self.reshard == "always" or pp == 1

    def grad_accumulation(self, pp: int) -> str:
        """How ZeRO-2/3 accumulate gradients over micro-batches by default."""
        return "unsharded" if self.unsharded_with_pp and pp > 1 else "sharded"

    def check_zero(self, zero_stage: int) -> None:
        if zero_stage not in self.zero_stages:
            raise LedgerError("zero_stage", f"{self.name} offers zero stages "
                                            f"{', '.join(map(str, self.zero_stages))}, got "
                                            f"{zero_stage}")


_NO_EXTRAS = dict(logits_bytes=0.0, comm_bucket_bytes=0.0, fsdp_buffers=False,
                  fsdp_prefetch_layers=0,
                  overhead_bytes=0.0, fragmentation=0.0)
# A CUDA context with PyTorch's kernels loaded, plus NCCL's communicators (buffers per
# channel and peer, NCCL_BUFFSIZE = 4 MiB); see SOURCES["overhead_bytes"].
_OVERHEAD = dict(overhead_bytes=1.0 * GiB, fragmentation=0.05)

FRAMEWORKS = {f.name: f for f in (
    Framework(
        name="ideal", summary="the seed's accounting: 2 + 2 + 12 B/param, one sharded "
        "collective per step, gathered-input SP, state and activations only",
        param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=False, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=False,
        activations="korthikanti", **_NO_EXTRAS),
    Framework(
        name="megatron", summary="Megatron-Core: distributed optimizer, fp32 main grads, "
        "SP with input re-gather, alltoall MoE dispatcher, Transformer Engine kernels",
        param_bytes=2, grad_bytes=4, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=True, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=True, moe_tokens_sp_shard=True,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        activations="megatron", logits_bytes=4.0 + 2.0, comm_bucket_bytes=0.0,
        fsdp_buffers=True, fsdp_prefetch_layers=1, **_OVERHEAD),
    Framework(
        name="torchtitan", summary="torchtitan: FSDP2 / HSDP with sharded fp32 params and "
        "grads, bf16 all-gathers, DTensor TP/SP, torch pipelining, reshard_after_forward = "
        "not pp",
        param_bytes=4, grad_bytes=4, master_bytes=0, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 3), sharded_grads_per_microbatch=True, reshard="not_pp",
        unsharded_with_pp=True,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        activations="torch", logits_bytes=2.0 + 4.0 + 4.0, comm_bucket_bytes=0.0,
        fsdp_buffers=True, fsdp_prefetch_layers=1, **_OVERHEAD),
    Framework(
        name="deepspeed", summary="DeepSpeed ZeRO-1/2/3: bf16 params and grads, fp32 "
        "master and moments, gradients reduced every micro-batch (stages 2, 3), a 5e8-element "
        "reduce bucket",
        param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=True, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        activations="torch", logits_bytes=2.0 + 4.0 + 4.0,
        comm_bucket_bytes=5e8 * 2, fsdp_buffers=True, fsdp_prefetch_layers=1, **_OVERHEAD),
    Framework(
        name="hf", summary="transformers' own modules (their saved tensors) under FSDP2 "
        "(accelerate): sharded fp32 params and grads, bf16 all-gathers",
        param_bytes=4, grad_bytes=4, master_bytes=0, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 3), sharded_grads_per_microbatch=True, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        activations="hf", logits_bytes=2.0 + 4.0 + 4.0, comm_bucket_bytes=0.0,
        fsdp_buffers=True, fsdp_prefetch_layers=1, **_OVERHEAD),
)}
DEFAULT = "megatron"


def of(cfg) -> Framework:
    """The convention a config (or the planner's namespace of arrays) runs under, in its
    explicit precision if it names one."""
    return get(getattr(cfg, "framework", DEFAULT), getattr(cfg, "precision", None))


def get(name: str, precision: str | None = None) -> Framework:
    """A framework convention by name (in an explicit precision if one is given); an
    unknown name lists the known ones."""
    if name not in FRAMEWORKS:
        raise LedgerError("framework", f"unknown framework {name!r}; known: "
                                       f"{', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name].with_precision(precision)


# framework -> fact -> source: the file and line (at the snapshot named in SNAPSHOTS) or the
# paper and section each fact is taken from. tests/test_frameworks.py checks that every
# fact of every real framework has one.
SNAPSHOTS = {
    "Megatron-LM": "NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553",
    "TransformerEngine": "NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b",
    "torchtitan": "pytorch/torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a",
    "DeepSpeed": "deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641",
    "NCCL": "NVIDIA/nccl 5067397c2676d5aed50042fc39e5c8ee96eb0027",
    "torch": "PyTorch 2.13.0 (torch/distributed/...)",
    "transformers": "transformers 5.23.0",
}
_CONTEXT = ("CUDA context ~0.3-0.43 GiB with lazy module loading (pytorch/pytorch#107667, "
            "#109888, PR #86509); NCCL: 4 MiB SIMPLE + 0.5 MiB LL + 4.69 MiB LL128 buffers "
            "per channel, per peer, per communicator (NCCL src/init.cc L810-828, "
            "src/include/device.h L97-115) - about 0.6 GiB for a handful of process groups; "
            "fragmentation: an assumption of this project (5%), not a published figure")
_FSDP2 = {
    "param_bytes": "torchtitan torchtitan/config/configs.py L87-92 (model built in fp32: "
                   "sharded params fp32)",
    "grad_bytes": "torchtitan configs.py L102-106 (mixed_precision_reduce fp32 only); torch "
                  "_fully_shard/_fsdp_collectives.py foreach_reduce (reduce-scatter in "
                  "reduce_dtype)",
    "master_bytes": "FSDP2 keeps no separate master: the fp32 shard is the optimizer's param",
    "moment_bytes": "torch.optim.AdamW exp_avg / exp_avg_sq in the param dtype (fp32)",
    "gathered_param_bytes": "torchtitan configs.py L94-100 (mixed_precision_param bf16); "
                            "torchtitan/distributed/fsdp.py L223-227 (MixedPrecisionPolicy)",
    "zero_stages": "torchtitan applies fully_shard (FSDP2) or replicate: "
                   "torchtitan/models/llama3/parallelize.py L57-78",
    "sharded_grads_per_microbatch": "torchtitan/trainer.py L856-902 (no "
                                    "set_requires_gradient_sync(False) around micro-batches); "
                                    "torch _fsdp_param_group.py post_backward L588-720",
    "reshard": "torchtitan/distributed/fsdp.py L112-136 (default -> not pp_enabled)",
    "unsharded_with_pp": "torch/distributed/pipelining/stage.py L781-848 (no grad sync and no "
                         "reshard after backward until the last micro-batch), L1164-1186",
    "fsdp_prefetch_layers": "torch _fsdp_param_group.py L795 (_backward_prefetch: the next "
                            "unit is gathered while one computes)",
    "fsdp_buffers": "torch _fsdp_param_group.py L499-509, L540-586 (unsharded params "
                    "allocated per unit, freed on reshard)",
}
SOURCES: dict[str, dict[str, str]] = {
    "megatron": {
        "fp8": "ledger.fp8 (each recipe's facts and sources: ledger.fp8.SOURCES)",
        "param_bytes": "Megatron-LM megatron/training/theoretical_memory_usage.py L293-303 "
                       "(bf16 params + fp32 main grads = 6 B, + 12/dp with the distributed "
                       "optimizer); docs/user-guide/features/dist_optimizer.md L14-20",
        "grad_bytes": "Megatron-LM megatron/training/arguments.py L1204-1217 (--bf16 forces "
                      "fp32 grad accumulation and reduction unless --grad-reduce-in-bf16)",
        "master_bytes": "theoretical_memory_usage.py L293-296 (fp32 main params)",
        "moment_bytes": "theoretical_memory_usage.py L293-296; arguments.py L3667-3684 (fp32 "
                        "exp_avg, exp_avg_sq)",
        "gathered_param_bytes": "dist_optimizer.md L36-48 (bf16 params all-gathered after "
                                "the step)",
        "zero_stages": "0: DDP; 1: --use-distributed-optimizer (param_and_grad_buffer.py "
                       "L701-724); 2/3: Megatron-FSDP sharding strategies (optim_grads, "
                       "optim_grads_params), costed here like FSDP2 - not read line by line",
        "sharded_grads_per_microbatch": "ZeRO-1 (distributed optimizer) reduces once per "
                                        "step: param_and_grad_buffer.py L863-885, "
                                        "distributed_data_parallel.py L588-599; ZeRO-2/3 "
                                        "(Megatron-FSDP) assumed per micro-batch as FSDP2",
        "reshard": "assumed as FSDP2 without PP (Megatron-FSDP)",
        "unsharded_with_pp": "pipeline schedules sync grads on the last micro-batch only: "
                             "megatron/core/pipeline_parallel/schedules.py L1127-1139 "
                             "(ZeRO-1/DDP; sharded stages keep their per-micro-batch sync)",
        "sp_regathers_input": "megatron/core/tensor_parallel/layers.py L604 (saves the SP "
                              "shard), L666-680 (re-gathers it for wgrad), L700-709; "
                              "TransformerEngine pytorch/module/linear.py L618-621, L979-999",
        "moe_dispatcher": "alltoall, as the large MoE recipes set it "
                          "(--moe-token-dispatcher-type alltoall); Megatron's code default "
                          "is allgather: transformer_config.py L891-893. Volumes: "
                          "token_dispatcher.py L375-387, L705-751, L824-870 (alltoall), "
                          "L281-303, L355-368 (allgather), L1809 (flex, DeepEP L1228-1245)",
        "moe_tokens_sp_shard": "megatron/core/transformer/moe/token_dispatcher.py L375-387, "
                               "L554-556, L705-711 (alltoall dispatcher: s b topk / (tp cp) "
                               "rows); the default is allgather (transformer_config.py "
                               "L891-893) - large MoE recipes set alltoall",
        "tied_embedding_allreduce": "megatron/core/distributed/finalize_model_grads.py "
                                    "L164-258 (first and last PP stage, main_grad, per step)",
        "activations": "Megatron-Core with Transformer Engine: transformer_config.py L1314 "
                       "(transformer_impl default); see ledger.activations",
        "logits_bytes": "megatron/core/tensor_parallel/cross_entropy.py L25 (logits cast to "
                        "fp32), L62, L181 (fp32 exp_logits saved), L186-210 (gradient in "
                        "place, then a bf16 copy for the output layer): 4 + 2 B",
        "comm_bucket_bytes": "grads are reduced from the contiguous main-grad buffer "
                             "(param_and_grad_buffer.py L888-899): no extra buckets",
        "fsdp_prefetch_layers": "as FSDP2 (Megatron-FSDP prefetches the next unit)",
        "fsdp_buffers": "as FSDP2",
        "overhead_bytes": _CONTEXT,
        "fragmentation": _CONTEXT,
    },
    "torchtitan": {
        "fp8": "ledger.fp8 (each recipe's facts and sources: ledger.fp8.SOURCES)",
        **_FSDP2,
        "sp_regathers_input": "DTensor TP/SP: autograd saves the gathered input "
                              "(torch/distributed/tensor/parallel/style.py; measured by "
                              "ledger.verify: 4 collectives per layer)",
        "moe_dispatcher": "not read line by line: costed as an all-to-all over EP of "
                          "the CP-local tokens",
        "moe_tokens_sp_shard": "not read: costed on the full CP-local token count",
        "tied_embedding_allreduce": "torchtitan/distributed/fsdp.py L238-250 (tied "
                                    "embedding and output are one unit; with PP they sit "
                                    "on two stages and their grads must be summed)",
        "activations": "torchtitan llama3 modules: torch SDPA, RMSNorm, SwiGLU; see "
                       "ledger.activations",
        "logits_bytes": "torchtitan/components/loss.py L51-58 (cross_entropy of pred.float()"
                        "): bf16 logits 2 + fp32 copy 4 + fp32 log-softmax / gradient 4 B",
        "comm_bucket_bytes": "FSDP2 reduces per unit, from the unit's own buffers: none extra",
        "overhead_bytes": _CONTEXT,
        "fragmentation": _CONTEXT,
    },
    "deepspeed": {
        "fp8": "ledger.fp8 (each recipe's facts and sources: ledger.fp8.SOURCES)",
        "param_bytes": "DeepSpeed deepspeed/runtime/zero/stage3.py (ds_tensor in the model "
                       "dtype, bf16)",
        "grad_bytes": "deepspeed/runtime/engine.py L1485-1496, L2363 (grad partitions in the "
                      "model dtype unless data_types.grad_accum_dtype); stage_1_and_2.py "
                      "L1670-1680; reduced in bf16: engine.py L1404-1416",
        "master_bytes": "stage3.py L1031 (_create_fp32_partitions)",
        "moment_bytes": "fp32 Adam moments on the fp32 partition",
        "gathered_param_bytes": "stage3 all_gather_coalesced in the model dtype "
                                "(partitioned_param_coordinator.py L569-609)",
        "zero_stages": "engine.py L2423 (stages 1/2), stage3.py",
        "sharded_grads_per_microbatch": "stage_1_and_2.py L1764-1769 and engine.py L2891-2915 "
                                        "(stage 2 every micro-batch, stage 1 at the "
                                        "boundary); stage3.py L1437-1470, L1570-1600, "
                                        "L1791-1828 (stage 3 every micro-batch)",
        "reshard": "parameter_offload.py L525-599 (fetch and release per forward and "
                   "backward of every micro-batch; params <= 1e5 elements persist, L311-323)",
        "unsharded_with_pp": "DeepSpeed's pipeline engine supports ZeRO-1 only: n/a",
        "sp_regathers_input": "no Megatron-style SP in DeepSpeed's ZeRO engine: n/a",
        "moe_dispatcher": "deepspeed/moe/sharded_moe.py L97-109, L720, L749 (_AllToAll "
                          "of the dispatched input and of the expert output over the EP "
                          "group)",
        "moe_tokens_sp_shard": "not read: costed on the full CP-local token count",
        "tied_embedding_allreduce": "DeepSpeed pipe TiedLayerSpec all-reduces tied weights' "
                                    "grads between their stages (not read line by line)",
        "activations": "HF/torch modules as DeepSpeed wraps them; see ledger.activations",
        "logits_bytes": "as torchtitan/HF: bf16 logits, fp32 copy, fp32 log-softmax",
        "comm_bucket_bytes": "deepspeed/runtime/zero/config.py L113 (reduce_bucket_size 5e8 "
                             "elements, bf16)",
        "fsdp_prefetch_layers": "config.py L238 (stage3_prefetch_bucket_size 5e7: about one "
                                "layer ahead)",
        "fsdp_buffers": "partitioned_param_coordinator.py L310, L494-533",
        "overhead_bytes": _CONTEXT,
        "fragmentation": _CONTEXT,
    },
    "hf": {
        "fp8": "ledger.fp8 (each recipe's facts and sources: ledger.fp8.SOURCES)",
        **_FSDP2,
        "reshard": "FSDP2 default reshard_after_forward=True for non-root units: torch "
                   "_fully_shard.py L180-190, L246-247",
        "unsharded_with_pp": "transformers' Trainer has no pipeline schedule: n/a",
        "sp_regathers_input": "no sequence parallelism in transformers' modules: n/a",
        "moe_dispatcher": "no expert dispatcher in transformers' modules: costed as an "
                          "all-to-all if ep > 1",
        "moe_tokens_sp_shard": "no expert dispatcher in transformers' modules: n/a",
        "tied_embedding_allreduce": "n/a without pipelining; counted if pp > 1",
        "activations": "transformers' own modules (modeling_llama.py etc.), measured by "
                       "tests/test_hf_activations.py; see ledger.activations",
        "logits_bytes": "transformers loss_utils ForCausalLMLoss (logits.float()): bf16 "
                        "logits 2 + fp32 copy 4 + fp32 log-softmax / gradient 4 B",
        "comm_bucket_bytes": "FSDP2 reduces per unit: none extra",
        "overhead_bytes": _CONTEXT,
        "fragmentation": _CONTEXT,
    },
}
