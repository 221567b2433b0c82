"""Buffers a framework allocates beside the state and the activations, each a named term
with its source (``Framework.te_buffers``): kept from their first use to the process's
end, so present at every point of a step and in the memory left after it.

- ``TE dummy wgrads``: Transformer Engine's linear layers under Megatron's gradient-
  accumulation fusion write the weight gradient straight into ``main_grad`` and hand
  autograd a dummy tensor instead, one per distinct (weight shape, dtype), cached for the
  run (TE d0067d0d transformer_engine/pytorch/module/base.py L134-147 ``get_dummy_wgrad``;
  linear.py L1357-1374, layernorm_linear.py L1172-1178, grouped_linear.py L1230-1236 for
  each expert's weight). The shapes are those of the rank's layers' TE modules
  (``weight_shapes``) after TP (ETP for routed experts), and the output layer's (V / tp, h):
  Megatron's own ColumnParallelLinear takes TE's cached dummy too wherever TE is installed,
  as every parameter under Megatron's DDP has grad_added_to_main_grad (Megatron-LM d98e8a64
  tensor_parallel/layers.py L733-762, HAVE_TE L57-61; distributed_data_parallel.py L187;
  the output layer built from it, models/gpt/gpt_model.py L272-293), one tensor for the
  MTP depths' calls; not the router (its own autograd function). Without the fusion
  (``ParallelConfig.grad_accumulation_fusion`` False) TE hands autograd the wgrad itself
  (linear.py L1357-1374: the dummy only under ``ctx.fuse_wgrad_accumulation``): none.
- ``cuBLAS workspace``: TE's GEMM workspace by the GPU's compute capability, 32 MiB +
  1 KiB from sm_90 (Hopper, Blackwell) and 4 MiB before it (Ampere, Ada)
  (cpp_extensions/gemm.py L40-45 ``get_cublas_workspace_size_bytes``, lru-cached
  L48-67), and one per compute stream (4: common/util/multi_stream.cpp L52-55) for
  grouped GEMMs (the routed experts). A GPU the ledger is not told takes Hopper's.
  None under Megatron's --transformer-impl local (``ParallelConfig.te_layers`` False): its
  layers are Megatron's own (megatron/core/models/backends.py L99-131 @d98e8a64,
  LocalSpecProvider: ColumnParallelLinear / RowParallelLinear on torch's GEMMs) - whose
  fused wgrad still takes TE's cached dummy where TE is installed (tensor_parallel/
  layers.py L733-762, HAVE_TE L57-61): the dummy wgrads stay.
- ``PyTorch cuBLAS workspaces``: the GEMMs Megatron runs through PyTorch rather than TE
  take PyTorch's cuBLAS workspace, one per (cuBLAS handle, stream) allocated from the
  caching allocator and kept in a process-wide map (pytorch/pytorch@26a39059
  aten/src/ATen/cuda/CublasHandlePool.cpp ``setWorkspaceForHandle``, ``getNewWorkspace``);
  a handle per thread (``getCurrentCUDABlasHandle``: a thread-local pool window), and the
  backward runs on the autograd engine's own thread for the device (torch/csrc/autograd/
  engine.cpp, Note [Allocating GPUs to autograd threads], @00c0674d): two, the forward's
  and the backward's, on a rank that runs any of these (Megatron-LM @d98e8a64):
  the output layer (Megatron's ColumnParallelLinear: torch.matmul forward and backward,
  tensor_parallel/layers.py L459, L683, L780-782, the wgrad under gradient-accumulation
  fusion fused_weight_gradient_mlp_cuda L713-727 on torch's handle too; TE's under
  ``fp8_output_proj``); unfused attention (``flash_attention`` False: Megatron's
  DotProductAttention torch.baddbmm / torch.bmm, transformer/dot_product_attention.py
  L194, L239, TE's UnfusedDotProductAttention alike, and --transformer-impl local, whose
  layers are that attention and Megatron's Column/RowParallelLinear - the reader maps it
  to unfused attention); the shared-expert gate (``Model.shared_expert_gate``:
  torch.nn.functional.linear, moe/shared_experts.py L204, L244, L593) on a rank holding
  MoE layers. Not the router: with TE installed its GEMMs are TE's (``te_general_gemm``
  with TE's workspace, moe/moe_utils.py L1389-1394, backward L1425-1432); torch.mm
  (L1396, L1435-1436) only under ``--moe-router-dtype fp64``, which the Megatron reader
  names as not priced. Each workspace is ``CUBLAS_WORKSPACE_CONFIG``'s size
  (``ParallelConfig.cublas_workspace_bytes``: its :SIZE:COUNT pairs, SIZE KiB x COUNT
  summed, ``parseChosenWorkspaceSize``), else PyTorch's default: 4096 KiB x 8 on sm_90,
  4096 KiB x 2 + 16 KiB x 8 on any other GPU at 26a39059 - and on Blackwell too (sm_10x,
  sm_12x) from pytorch/pytorch#175344 (merged 2026-02-19; in torch 2.12.0 and 2.13.0,
  the torch the ledger's records name): that default, except for a Megatron-Bridge row
  whose release's container ran an older torch (``ledger.validation.bridge_stack.
  torch_workspace_of``). A later CublasHandlePool.cpp (commit not found; not in torch
  2.13.0's Python bindings) stops caching the workspace by default
  (TORCH_CUBLAS_WORKSPACE_CACHE): not priced. PyTorch's separate cuBLASLt workspace
  (CUBLASLT_WORKSPACE_SIZE, 1 MiB per (handle, stream) by default,
  ``getCUDABlasLtWorkspace``) is not priced.
- ``Megatron global buffer``: Megatron's GlobalMemoryBuffer keeps one tensor per (name,
  dtype) for the run, grown to the largest request (Megatron-LM d98e8a64 core/utils.py
  L727-753). Its "mpu" tensor takes, in the activations' dtype, the sequence-parallel
  all-gather of each input of Megatron's own linear layers - the output layer's, s/cp x b
  x h, forward and backward (tensor_parallel/layers.py L623-631, L666-673; under TP > 1
  with SP, and not TE's LM head under ``fp8_output_proj``) - and, under --transformer-impl
  local, every layer's and the scores of Megatron's DotProductAttention, b x a/tp x s x s
  (transformer/dot_product_attention.py L187-191). Not priced: the allgather MoE
  dispatcher's gather into it (moe/token_dispatcher.py L300).
- ``Megatron-FSDP param / grad double buffer``: under ``fsdp_double_buffer`` (ZeRO-3,
  layers resharded) Megatron-FSDP gathers each layer's params and collects its gradients
  for the reduce-scatter in a pool of two buffers per unit bucket, taken from its global
  memory buffer and never freed (Megatron-LM 2edffadb megatron_fsdp/
  param_and_grad_buffer.py L2114-2131 FixedPoolAllocator size 2, L642-826; utils.py
  get_global_memory_buffer): two layers in the gathered dtype (FP8 under the recipe's
  param gather) and two in the main-grad dtype - sized by the largest layer (the pool
  serves the most common unit; others fall back to dynamic buckets, L743-805).
- Megatron-FSDP's output-layer gradient bucket (``head_grad_bytes``): alive from the
  output layer's backward through the first layer's.
- Megatron's deferred embedding wgrads (``deferred_wgrad_bytes``): not kept past the step.
- The optimizer's fp32 copies of the gradients (``fp32_grad_copies``): under Megatron's
  mixed-precision optimizers a gradient buffer kept in bf16 (--grad-reduce-in-bf16) or
  fp16 (--fp16) is copied to fp32 for the step, the distributed optimizer's shard or the
  whole buffer without it, unless the precision-aware optimizer reads the buffer itself
  (with non-fp32 main params, no FP8 recipe or delayed scaling, or CPU offload; any state
  dtype given, fp32 too, is that optimizer, as a launch's --use-precision-aware-optimizer
  is read: ledger.io.megatron.dtypes.state_dtypes) or
  Megatron-FSDP holds the gradients; the copies stay until the next step's zero_grad -
  priced at the optimizer step and after it (SOURCES["fp32_grad_copy"]).
- What a pipeline rank keeps after the step (``kept_input_tensors``): under Megatron's
  schedules each model chunk but the first stage's keeps its last micro-batch's received
  input (the decoder's ``set_input_tensor`` reference) and, retained by the backward, that
  input's gradient - two stage-boundary tensors per chunk, from the step's end until the
  chunk's next forward replaces them (SOURCES["pipeline_inputs_kept"]). Allocated after
  the step and at the optimizer step; not at the step's peak, where each chunk's input is
  a micro-batch in flight (its saved activations) and has no gradient yet.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ledger.anatomy.mixers import LayerKind
from ledger.config import expert_tp
from ledger.placement.stages import model_stages, rank_stages

CUBLAS_WORKSPACE_BYTES = 32 * 2**20 + 1024  # TE gemm.py L40-45, sm90 and later
# PyTorch's own cuBLAS workspace by default (CublasHandlePool.cpp parseChosenWorkspaceSize
# @26a39059): ":4096:8" on sm_90, ":4096:2:16:8" elsewhere; two of them (module docstring);
# ":4096:8" on Blackwell too from pytorch/pytorch#175344 (``use32mb``: major 9, 10, 12)
TORCH_SM90_WORKSPACE_BYTES = 4096 * 1024 * 8
TORCH_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
TORCH_32MB_GENERATIONS = ("", "hopper", "blackwell")  # at torch 2.12.0 on
TORCH_GEMM_THREADS = 2  # the forward's thread and the autograd engine's device thread
PRE_HOPPER_WORKSPACE_BYTES = 4_194_304  # TE gemm.py L45, compute capability below 9
PRE_HOPPER = ("ampere", "ada")  # generations of sm_8x (ledger.system.chips GPU.generation)


def cublas_workspace_bytes(generation: str = "") -> int:
    """TE's GEMM workspace on a GPU of ``generation`` (module docstring)."""
    return PRE_HOPPER_WORKSPACE_BYTES if generation in PRE_HOPPER else CUBLAS_WORKSPACE_BYTES
COMPUTE_STREAMS = 4  # TE multi_stream.cpp L52-55


def weight_shapes(model, kind: LayerKind, tp, etp) -> set[tuple]:
    """(rows, cols) of every TE linear weight of one layer of ``kind`` on one GPU, as
    Megatron-Core builds them (gpt_layer_specs.py @d98e8a64): the fused linear_qkv
    ((q + 2 kv heads) x d / tp, h) and linear_proj, or MLA's down projections (whole)
    and up projections (/ tp); the fused fc1 (gate and up, / tp) and fc2 of the dense MLP,
    of each routed expert (/ etp) and of the shared experts."""
    h, a, d = model.hidden, model.heads, model.head_dim
    g = 2 if model.gated_mlp else 1
    v = getattr(model, "v_head_dim", d)
    if getattr(model, "attention", "mha") == "mla":
        ql, kvl = model.q_lora_rank, model.kv_lora_rank
        shapes = {(kvl + model.qk_rope_head_dim, h),
                  (a * (model.qk_nope_head_dim + v) / tp, kvl)}
        shapes |= {(ql, h), (model.q_dim / tp, ql)} if ql else {(model.q_dim / tp, h)}
    else:
        shapes = {((a + 2 * model.kv_heads) * d / tp, h)}
    shapes.add((h, a * v / tp))
    if not kind.moe:
        return shapes | {(g * model.ffn_hidden / tp, h), (h, model.ffn_hidden / tp)}
    f, x = model.moe_ffn_hidden, getattr(model, "expert_hidden", h)  # LatentMoE: latent
    shapes |= {(g * f / etp, x), (x, f / etp)}
    if x != h:  # and its two projections, whole (moe_layer.py:265-304 at d98e8a64dd)
        shapes |= {(x, h), (h, x)}
    shared = getattr(model, "shared_ffn", model.shared_experts * f)
    if shared:
        shapes |= {(g * shared / tp, h), (h, shared / tp)}
    return shapes


def torch_workspace_bytes(cfg, generation: str = "") -> int:
    """One PyTorch cuBLAS workspace (module docstring): the config's CUBLAS_WORKSPACE_CONFIG
    size, else PyTorch's default on a GPU of ``generation`` (Hopper and Blackwell: 32 MiB)."""
    given = getattr(cfg, "cublas_workspace_bytes", None)
    if given is not None:
        return int(given)
    return TORCH_SM90_WORKSPACE_BYTES if generation in TORCH_32MB_GENERATIONS \
        else TORCH_WORKSPACE_BYTES


def framework_buffers(model, cfg, kinds, fw=None, generation: str = "",
                      rank: int | None = None) -> dict[str, float]:
    """Named bytes of the buffers ``cfg``'s framework keeps on one GPU of ``generation``
    holding layers of ``kinds`` (``LayerKind``s; empty when the rank holds none), of PP rank
    ``rank`` (None: one without the output layer)."""
    from ledger.placement.stages import head_ranks

    from ledger.frameworks import of

    from ledger.placement.graphs import graph_buffers

    fw = of(cfg) if fw is None else fw
    graphs = graph_buffers(model, cfg) if kinds else {}
    if not fw.te_buffers:
        return graphs
    head = rank is not None and rank in head_ranks(cfg.pp, cfg.vp, cfg.schedule)
    out = dict(_te_buffers(model, int(cfg.tp), int(expert_tp(cfg)), frozenset(kinds),
                           fw.param_bytes, cublas_workspace_bytes(generation), head))
    if not getattr(cfg, "te_layers", True):  # --transformer-impl local: no TE GEMM
        out.pop("cuBLAS workspace")
    if not getattr(cfg, "grad_accumulation_fusion", True):  # TE returns each wgrad
        out.pop("TE dummy wgrads")
    shared = global_buffer_bytes(model, cfg, head, bool(kinds))
    if np.ndim(shared) or shared:
        out["Megatron global buffer"] = shared
    torch_gemms = torch_gemm_rank(model, cfg, kinds, head)
    if torch_gemms:
        out["PyTorch cuBLAS workspaces"] = TORCH_GEMM_THREADS * torch_workspace_bytes(
            cfg, generation)
    return out | graphs | fsdp_double_buffers(model, cfg, fw)


def torch_gemm_rank(model, cfg, kinds, head: bool) -> bool:
    """Whether a rank holding layers of ``kinds`` (and the output layer when ``head``) runs
    GEMMs through PyTorch (module docstring): a Megatron output layer, unfused attention,
    a shared-expert gate."""
    if head and not getattr(cfg, "fp8_output_proj", False):
        return True
    if not getattr(cfg, "flash_attention", True) and any(
            getattr(k, "mixer", "") == "attention" for k in kinds):
        return True
    return bool(getattr(model, "shared_expert_gate", False)) and any(
        getattr(k, "moe", False) for k in kinds)


def grid_framework_buffers(model, cfg, layout, kinds, held, reps, fw, generation) -> np.ndarray:
    """``framework_buffers``' total on each of the planner's ranks ``reps`` of one layout
    ((tp, etp, pp, vp, schedule)), rank r holding ``held[r]`` layers of each of ``kinds``; the
    run's facts (gradient-accumulation fusion, a TE head, the cuBLAS config) from ``cfg``."""
    from types import SimpleNamespace

    tp, etp, pp, vp, schedule = layout
    one = SimpleNamespace(tp=tp, etp=etp, pp=pp, vp=vp, schedule=schedule, **{
        k: getattr(cfg, k, v) for k, v in (("grad_accumulation_fusion", True),
                                          ("fp8_output_proj", False),
                                          ("flash_attention", True), ("te_layers", True),
                                          ("cublas_workspace_bytes", None))})
    return np.array([sum(framework_buffers(model, one, [k for k, n in zip(kinds, held[r]) if n],
                                           fw, generation, r).values()) for r in reps])


def fsdp_double_buffers(model, cfg, fw) -> dict[str, float]:
    """Megatron-FSDP's double buffers (module docstring), or none."""
    from ledger.frameworks.fp8 import gather_wire_bytes
    from ledger.placement.layers import largest_layer_params

    if not (np.all(double_buffered(cfg, fw)) and np.all(cfg.reshard_after_forward)):
        return {}
    rec, layer = fw.fp8, largest_layer_params(model, cfg)
    wire = gather_wire_bytes(rec, zero3=True) if rec is not None and rec.param_gather \
        else fw.gathered_param_bytes
    return {"Megatron-FSDP param double buffer": 2 * layer * wire,
            "Megatron-FSDP grad double buffer": 2 * layer * fw.grad_bytes}


def grid_double_buffers(model, cfg, zero, fw):
    """``fsdp_double_buffers``' total on the planner's rows of one layout (``cfg`` its
    tp, ep, etp, resharding and the run's ``fsdp_double_buffer``), each at its ZeRO stage
    ``zero`` (an array): on the ZeRO-3 rows only."""
    from types import SimpleNamespace

    one = SimpleNamespace(tp=cfg.tp, ep=cfg.ep, etp=getattr(cfg, "etp", None), zero_stage=3,
                          reshard_after_forward=cfg.reshard_after_forward,
                          fsdp_double_buffer=getattr(cfg, "fsdp_double_buffer", False))
    return sum(fsdp_double_buffers(model, one, fw).values()) * (np.asarray(zero) == 3)


def double_buffered(cfg, fw):
    """Whether ``cfg`` runs Megatron-FSDP's double buffers (ZeRO-3 under Megatron): a
    bool, or one per row of the planner's array of ZeRO stages."""
    on = bool(getattr(cfg, "fsdp_double_buffer", False) and fw.family == "megatron"
              and fw.fsdp_buffers)
    return np.equal(cfg.zero_stage, 3) if on else False


@lru_cache(maxsize=4096)
def _te_buffers(model, tp: int, etp: int, kinds: frozenset, param_bytes, workspace,
                head: bool = False) -> tuple:
    shapes = {(model.vocab / tp, model.hidden)} if head else set()
    for kind in kinds:
        if kind.mixer == "attention" and kind.mlp != "none":
            shapes |= weight_shapes(model, kind, tp, etp)
    grouped = any(kind.moe for kind in kinds)
    return (("TE dummy wgrads", sum(r * c for r, c in shapes) * param_bytes),
            ("cuBLAS workspace", workspace * (1 + COMPUTE_STREAMS * grouped)))


def head_grad_bytes(cfg, fw, root_params, head_params):
    """Megatron-FSDP's output-layer gradient bucket (main-grad dtype), alive from the output
    layer's backward, beside the logits' gradient, through the first layer's."""
    on = fw.fsdp_buffers and fw.fsdp_head_grads_held and not fw.fsdp_root_grads_held
    return np.equal(cfg.zero_stage, 3) * on * fw.grad_bytes * head_bucket_params(
        cfg, root_params, head_params)


def head_bucket_params(cfg, root_params, head_params):
    """Parameters of Megatron-FSDP's bucket holding the output layer (0 off its rank):
    without the embedding where it fills a ``cfg.dp_bucket_params`` bucket (its source)."""
    first = root_params - head_params  # the embedding's side, on this rank
    size = np.asarray(getattr(cfg, "dp_bucket_params", None) or 0)  # None: no size set
    split = (size > 0) & (size <= first)
    return np.where(head_params > 0, np.where(split, head_params, root_params), 0.0)


def deferred_wgrad_bytes(cfg, logits, heads, boundary) -> float:
    """Bytes the output layer holds for Megatron's --defer-embedding-wgrad-compute: each of
    its first ``wgrad_deferral_limit`` calls (0: every call of the step) appends its input
    to a list in the forward (tensor_parallel/layers.py L1228-1233 @d98e8a64) and its
    gradient output - the logits' gradient - in the backward instead of computing the
    wgrad (L661-664); the lists live from the step's first calls to the pipeline flush,
    where drain_embedding_wgrad_compute pops them (utils.py L1282-1300; schedules.py
    L894-926). A call is one head's: the output layer runs once per micro-batch and per MTP
    module (multi_token_prediction.py L1012-1017). ``logits``: one micro-batch's logit
    elements on the rank, every head's; ``boundary``: one call's input bytes."""
    limit = getattr(cfg, "wgrad_deferral", None)  # the planner's grid sets none
    if limit is None:
        return 0.0
    calls = cfg.num_microbatches * heads
    held = calls if limit == 0 else np.minimum(limit, calls)
    return held * (logits / heads * cfg.act_bytes + boundary)


def kept_input_tensors(cfg, fw, rank: int) -> int:
    """Stage-boundary tensors PP rank ``rank`` keeps after the step (module docstring):
    an input and its gradient for each model stage it holds but the first."""
    if cfg.pp == 1 or not fw.pipeline_inputs_kept:
        return 0
    return 2 * sum(s != 0 for s in rank_stages(cfg.pp, cfg.vp, cfg.schedule)[rank])


def recv_buffers(cfg, fw, rank: int) -> int:
    """Receive buffers per micro-batch one PP rank keeps for the whole step
    (``Framework.pipeline_recv_buffers``), each one micro-batch's stage output: for each
    of its stages the input activations (but the first stage's) and the output
    gradients (but the last stage's)."""
    if cfg.pp == 1 or not fw.pipeline_recv_buffers:
        return 0
    stages = rank_stages(cfg.pp, cfg.vp, cfg.schedule)[rank]
    last = model_stages(cfg.pp, cfg.vp, cfg.schedule) - 1
    ends = sum(s == 0 for s in stages) + sum(s == last for s in stages)
    return 2 * len(stages) - ends


def fp32_grad_copies(cfg, fw):
    """Whether the optimizer steps fp32 copies of the gradients (module docstring): a
    bool, or one per row of the planner's array of ZeRO stages."""
    if not fw.fp32_grad_copy or fw.grad_bytes >= 4 or getattr(
            cfg, "optimizer_offload_fraction", 0.0):
        return False
    master = getattr(cfg, "master_dtype", None)  # a dtype given (fp32 too): precision-aware
    aware = any(getattr(cfg, f, None) is not None for f in ("master_dtype", "exp_avg_dtype",
                                                            "exp_avg_sq_dtype"))
    recipe = fw.fp8.name if fw.fp8 is not None else None
    decoupled = aware and (master not in (None, "fp32") or recipe in (None, "delayed"))
    return np.less(cfg.zero_stage, 2) & (not decoupled)


def global_buffer_bytes(model, cfg, head, layers: bool = True):
    """Megatron's GlobalMemoryBuffer "mpu" tensor on one GPU (module docstring): on a rank
    holding the output layer (``head``) and, under --transformer-impl local, any rank with
    layers; numbers, or arrays over the planner's rows. 0 for a config without a
    micro-batch (the planner's per-layout one: grid_memory adds it per row)."""
    if getattr(cfg, "micro_batch", None) is None:
        return 0.0
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    local = not getattr(cfg, "te_layers", True)
    own = np.logical_or(np.logical_and(head, not getattr(cfg, "fp8_output_proj", False)),
                        local and layers)
    gather = own * tokens * model.hidden * ((cfg.tp > 1) & np.asarray(cfg.sequence_parallel))
    scores = (local and layers) * cfg.micro_batch * model.heads / cfg.tp * model.seq_len \
        * model.seq_len / cfg.cp
    return np.maximum(gather, scores) * cfg.act_bytes
