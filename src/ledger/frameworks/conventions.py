"""Framework conventions: what each training framework really keeps and sends, as data.

The same placement costs different bytes under Megatron-Core, torchtitan (FSDP2),
DeepSpeed or Hugging Face modules: which dtype each state is kept in, whether sharded
gradients are reduced after every micro-batch or once per step, whether sequence
parallelism re-gathers its input in the backward, how many tokens the MoE dispatcher
sends, what the loss keeps of the logits, which buffers the framework allocates. Each
framework is one ``Framework`` record (``ledger.frameworks.framework``) below; every fact
carries its source in ``SOURCES``. ``ideal`` is the seed's accounting (the ZeRO paper's 2 + 2 + 12 bytes per
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

from dataclasses import replace

from ledger.errors import LedgerError
from ledger.frameworks.checkpoints import FORMATS as CHECKPOINTS
from ledger.frameworks.dtypes import with_dtypes
from ledger.frameworks.framework import Framework

GiB = 2**30
MiB = 2**20


_NO_EXTRAS = dict(loss="none", tp_loss="none", compiled_loss=None, pipeline_outputs="none",
                  pipeline_recv_buffers=False, working_set=False,
                  grads_persist=True, optimizer_temp_moments=0, cp_buffers="none",
                  comm_bucket_bytes=0.0, fsdp_buffers=False, fsdp_prefetch_layers=0,
                  overhead_bytes=0.0, fragmentation=0.0, compiled_fragmentation=0.0)
_STAGES = (0, 1, 2, 3)
# FSDP2 overlaps its gathers and reduce-scatters on streams of its own and a launch cannot
# turn that off; torch DDP (torchtitan's replicate) overlaps its bucketed all-reduce
_FSDP2_OVERLAP = dict(overlap_grad_reduce=_STAGES, overlap_param_gather=_STAGES[1:],
                      overlap_fixed=_STAGES, dp_bucket_params=(6_553_600, 0),
                      one_bucket_exposed=False, ep_overlap=False, ep_overlap_schedules=())
# A CUDA context with PyTorch's kernels loaded, plus NCCL's communicators (buffers per
# channel and peer, NCCL_BUFFSIZE = 4 MiB); see SOURCES["overhead_bytes"]. The caching
# allocator's fragmentation (reserved over allocated at the peak, eager and compiled) is
# fitted by benchmarks/fit_memory.py on a declared set of measured peaks
# (ledger.validation.memory.calibration_rows) and shipped as its first line.
FRAGMENTATION = (0.09, 0.01)
# Of that share, what stays in split blocks the allocator cannot hand back when a
# cudaMalloc fails (the verdict's fragmentation, SOURCES["allocator_reclaim"]): reserved
# peaks cannot tell it from the cached whole blocks, so it is fitted by
# benchmarks/fit_memory.py on the outcome rows (ran / out of memory: the midpoint of the
# shares every verdict allows, ledger.validation.outcomes) and shipped as its figure.
UNRETURNABLE = 0.011
_OVERHEAD = dict(working_set=True, overhead_bytes=1.0 * GiB, fragmentation=FRAGMENTATION[0],
                 compiled_fragmentation=FRAGMENTATION[1], unreturnable=UNRETURNABLE)
_ALL_SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "interleaved-zb", "zb-v",
                  "dualpipe", "dualpipev")
_TORCH_SCHEDULES = ("gpipe", "1f1b", "interleaved", "interleaved-zb", "zb-v",
                    "dualpipev")  # no ZB-H1

FRAMEWORKS = {f.name: f for f in (
    Framework(
        name="ideal", summary="the seed's accounting: 2 + 2 + 12 B/param, one sharded "
        "collective per step, gathered-input SP, state and activations only",
        param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=False, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=False,
        schedules=_ALL_SCHEDULES, split_slack=0, even_split=False, split="ends",
        overlap_grad_reduce=_STAGES, overlap_param_gather=_STAGES[1:], overlap_fixed=(),
        dp_bucket_params=(40_000_000, 1_000_000), one_bucket_exposed=True, ep_overlap=False,
        ep_overlap_schedules=_ALL_SCHEDULES, checkpoint=CHECKPOINTS["ideal"],
        version="Korthikanti et al. 2022 (the seed's accounting)", activations="korthikanti",
        dropout=0.1, **_NO_EXTRAS),
    Framework(
        name="megatron", summary="Megatron-Core: distributed optimizer, fp32 main grads, "
        "SP with input re-gather, alltoall MoE dispatcher, Transformer Engine kernels",
        param_bytes=2, grad_bytes=4, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=True, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=True, moe_tokens_sp_shard=True,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        schedules=("1f1b", "interleaved"), split_slack=2, even_split=True, split="ends",
        overlap_grad_reduce=(2, 3), overlap_param_gather=(3,), overlap_fixed=(2, 3),
        dp_bucket_params=(40_000_000, 1_000_000), one_bucket_exposed=True, ep_overlap=False,
        ep_overlap_schedules=("interleaved",), overlap_p2p_schedules=("interleaved",),
        checkpoint=CHECKPOINTS["megatron"],
        version="Megatron-LM d98e8a64 with TransformerEngine d0067d0d",
        activations="megatron", loss="vocab-parallel", tp_loss="vocab-parallel",
        compiled_loss=None,
        dropout=0.1, pipeline_outputs="none", pipeline_recv_buffers=False,
        grads_persist=True, optimizer_temp_moments=0, cp_buffers="te-p2p", comm_bucket_bytes=0.0,
        fsdp_buffers=True, fsdp_prefetch_layers=1, te_buffers=True,
        fsdp_root_grads_held=False, fsdp_head_grads_held=True,
        grouped_gemm_fitted=True, mtp_embedding="stage", pipeline_inputs_kept=True,
        fp32_grad_copy=True, **_OVERHEAD),
    Framework(
        name="torchtitan", summary="torchtitan: FSDP2 / HSDP with sharded fp32 params and "
        "grads, bf16 all-gathers, DTensor TP/SP, torch pipelining, reshard_after_forward = "
        "not pp",
        param_bytes=4, grad_bytes=4, master_bytes=0, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 3), sharded_grads_per_microbatch=True, reshard="not_pp",
        unsharded_with_pp=True,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        schedules=_TORCH_SCHEDULES, split_slack=2, even_split=False, split="torchtitan",
        **_FSDP2_OVERLAP, checkpoint=CHECKPOINTS["torchtitan"],
        version="torchtitan b5bcd76c on torch 2.13.0",
        activations="torch", loss="eager", tp_loss="loss-parallel", compiled_loss="compiled",
        dropout=0.0,
        pipeline_outputs="none", pipeline_recv_buffers=True, pipeline_input_grads="split",
        grads_persist=False,
        optimizer_temp_moments=1, cp_buffers="torch-allgather", comm_bucket_bytes=0.0,
        fsdp_buffers=True, fsdp_prefetch_layers=1, frozen_param_bytes=4,
        offloads=("params",), offload_stage={"params": (3,)}, **_OVERHEAD),
    Framework(
        name="deepspeed", summary="DeepSpeed ZeRO-1/2/3: bf16 params and grads, fp32 "
        "master and moments, gradients reduced every micro-batch (stages 2, 3), a 5e8-element "
        "reduce bucket",
        param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, gathered_param_bytes=2,
        zero_stages=(0, 1, 2, 3), sharded_grads_per_microbatch=True, reshard="always",
        unsharded_with_pp=False,
        sp_regathers_input=False, moe_tokens_sp_shard=False,
        moe_dispatcher="alltoall", tied_embedding_allreduce=True,
        schedules=("1f1b",), split_slack=0, even_split=False, split="ends",
        overlap_grad_reduce=(3,), overlap_param_gather=(3,), overlap_fixed=(),
        dp_bucket_params=(500_000_000, 0), one_bucket_exposed=False, ep_overlap=False,
        ep_overlap_schedules=(), checkpoint=CHECKPOINTS["deepspeed"],
        version="DeepSpeed edaa7221",
        activations="torch", loss="eager", tp_loss="eager", compiled_loss=None, dropout=0.0,
        pipeline_outputs="none", pipeline_recv_buffers=False, grads_persist=True,
        optimizer_temp_moments=0, cp_buffers="none",
        comm_bucket_bytes=5e8 * 2, fsdp_buffers=True, fsdp_prefetch_layers=1,
        offloads=("optimizer", "params"), offload_stage={"optimizer": (1, 2, 3),
                                                         "params": (3,)}, **_OVERHEAD),
)}
# transformers' modules under FSDP2 (accelerate): torchtitan's dtypes, collectives and
# schedules; their own saved tensors; resharded after forward and grads reduced every
# micro-batch, with or without PP
FRAMEWORKS["hf"] = replace(
    FRAMEWORKS["torchtitan"], name="hf",
    summary="transformers' own modules (their saved tensors) under FSDP2 (accelerate): "
            "sharded fp32 params and grads, bf16 all-gathers",
    reshard="always", unsharded_with_pp=False, activations="hf", frozen_param_bytes=2,
    version="transformers 5.23.0 on torch 2.13.0 (FSDP2)", loss="eager", tp_loss="eager",
    compiled_loss="compiled")
# torchtitan as it ran the published measurements (ledger.validation.memory): its Llama
# modules, checkpoint policy, loss and torch pipelining at those commits
FRAMEWORKS["torchtitan@2024-12"] = replace(
    FRAMEWORKS["torchtitan"], name="torchtitan@2024-12",
    summary="torchtitan 9dec370 (2024-12-26) on torch 1963fc8: its own RMSNorm with an "
            "fp32 copy, K/V repeated before SDPA, the loss never compiled, every pipeline "
            "stage keeping its outputs to the step's end",
    version="torchtitan 9dec370a on torch 1963fc83", activations="torch-2412",
    compiled_loss=None, pipeline_outputs="all", pipeline_input_grads="all")
FRAMEWORKS["torchtitan@2024-04"] = replace(
    FRAMEWORKS["torchtitan@2024-12"], name="torchtitan@2024-04",
    summary="torchtitan 395a526 / 1ea476e (April 2024): Triton fused RMSNorm, the model's "
            "fp32 logits held by the loop through the backward",
    version="torchtitan 395a5262 / 1ea476e9 (torch nightly of April 2024)",
    activations="torch-2404", loss="eager-held")
FRAMEWORKS["torchtitan@2025-06"] = replace(
    FRAMEWORKS["torchtitan"], name="torchtitan@2025-06",
    summary="torchtitan e7c0cae (2025-06-13) on torch 2.8.0a0+5228986: nn.RMSNorm, the "
            "loss compiled with the model, the last pipeline stage keeping its outputs",
    version="torchtitan e7c0cae9 on torch 2.8.0a0+5228986c", activations="torch-2506",
    pipeline_outputs="last", pipeline_input_grads="all")
# DeepSeek's own stack (HAI-LLM, not released) as the DeepSeek-V3 report describes it and
# deepseek-ai/DualPipe runs its schedules: Megatron-Core's state and dispatcher facts
# (the report's ZeRO-1, FP32 master, gradients and moments cut to BF16 by its FP8 recipe),
# DualPipe with each forward-backward pair's all-to-alls hidden under the other's compute
FRAMEWORKS["deepseek"] = replace(
    FRAMEWORKS["megatron"], name="deepseek",
    summary="DeepSeek's own stack (DeepSeek-V3 report sec. 3.2): DualPipe, its EP "
            "all-to-alls overlapped in forward-backward pairs, ZeRO-1, no TP",
    schedules=("1f1b", "dualpipe", "dualpipev"), even_split=False, ep_overlap=True,
    ep_overlap_schedules=("dualpipe", "dualpipev"), te_buffers=False,  # not TE: unpublished
    grouped_gemm_fitted=False,  # DeepGEMM's grouped kernels: the dense rate (SOURCES)
    mtp_embedding="rank",  # the MTP modules share the first stage's embedding (SOURCES)
    pipeline_inputs_kept=False,  # DualPipe's own stage code, not Megatron's set_input_tensor
    fp32_grad_copy=False,  # its optimizer's gradient handling is not published
    version="DeepSeek-V3 report (arXiv:2412.19437) and deepseek-ai/DualPipe 3da1bbea")
DEFAULT = "megatron"


def of(cfg) -> Framework:
    """The convention a config (or the planner's namespace of arrays) runs under, in its
    explicit precision if it names one, with the state dtypes it sets (``with_dtypes``)."""
    fw = get(getattr(cfg, "framework", DEFAULT), getattr(cfg, "precision", None))
    return with_dtypes(fw, *(getattr(cfg, f, None) for f in (
        "grad_dtype", "master_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")),
        precision=getattr(cfg, "precision", None),
        offload=bool(getattr(cfg, "optimizer_offload_fraction", 0.0)))


def get(name: str, precision: str | None = None) -> Framework:
    """A framework convention by name (in an explicit precision if one is given); an
    unknown name lists the known ones."""
    if name not in FRAMEWORKS:
        raise LedgerError("framework", f"unknown framework {name!r}; known: "
                                       f"{', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name].with_precision(precision)
