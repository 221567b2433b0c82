"""The host's share of a step: the seconds the CPU spends launching a layer's kernels (the
framework's Python, the CUDA launches), per micro-batch - a cost that does not shrink
with the micro-batch's tokens.

The GPU cannot run a kernel the host has not launched yet. Where the host runs ahead of
the GPU its time hides; where a layer's kernels are short (few tokens, a fine-grained MoE)
the GPU waits for the host. A dropless MoE layer in Megatron-Core brings the host to a
halt once per layer and pass: the grouped GEMM and the permutation need each expert's
token count on the host (megatron/core/transformer/moe/experts.py L737, L897
``tokens_per_expert.tolist()``; the alltoall dispatcher's ``d2h_event.synchronize()``,
token_dispatcher.py L956-958; DeepEP's ``tokens_per_expert.sum().item()``, L1450, at
NVIDIA/Megatron-LM d98e8a64), so it can never run more than a layer ahead. A layer's
forward (and backward) therefore takes at least the host's time for it: the time model
prices each layer pass at max(GPU, host), and the excess is the step's ``host`` term.

What a CUDA graph captures replays without the host (Megatron --cuda-graph-impl
transformer_engine / local with --cuda-graph-scope: transformer_config.py cuda_graph_scope,
and PR NVIDIA/Megatron-LM#2168 for the attn / moe_router / moe_preprocess scopes;
full_iteration captures the whole step): a captured block costs the host nothing here.

The host's seconds per eager block are declared constants of ``ledger.step.Calibration``
fitted by benchmarks/fit.py (stage 3) on declared Megatron-Bridge calibration rows:
``host_block_s``, one attention block, one dense MLP block or one Mamba mixer (a few fused
Transformer Engine modules each); ``host_router_s``, one MoE router with its preprocessing
(the two moe_router / moe_preprocess scopes each half of it: top-k, the auxiliary losses,
the routing map and the dispatcher's metadata, many small kernels - the scopes Megatron
graphs apart for that reason, PR NVIDIA/Megatron-LM#2168); and
``host_moe_s``, the rest of a MoE block (dispatch, permute, grouped GEMMs, unpermute,
combine, the shared expert), captured only by the "moe" scope, plus ``host_expert_s`` for
each routed expert the GPU holds. What one routed expert costs the host per micro-batch, in
the GroupedLinear the Megatron-Bridge releases pin (NVIDIA/TransformerEngine 4220403e, 2.16,
Megatron-Bridge v0.5.0 uv.lock; the same loops in 2.9 to 2.14): the inputs are quantized
for all experts in one call (transformer_engine/pytorch/module/grouped_linear.py L177-182),
and the per-expert work is each GEMM's cuBLASLt call, issued one by one from C++ across
the compute streams (common/gemm/cublaslt_gemm.cu L972-1025), each building its
descriptors and asking the heuristic afresh (L454-461, L768-785) - two in the forward
(fc1, fc2: grouped_linear.py L234-245), four in the backward (input and weight gradients,
L475-486, L544-564) - with the per-parameter gradient bookkeeping (L574-601; Megatron's
DDP hook per parameter, distributed_data_parallel.py L449-473 @ NVIDIA/Megatron-LM
d0b3b775). The per-expert weight cast (L196-209) is not a per-micro-batch cost: with
FP8 / MXFP8 primary weights (``--fp8-param-gather``) it only retargets the weight's usage
(module/base.py L712-722), and otherwise it runs on a step's first micro-batch alone
(``update_workspace`` is ``is_first_microbatch``, L198, which Megatron's TEGroupedLinear
passes and clears, extensions/transformer_engine.py L2224-2233, and the schedule sets
once a step, pipeline_parallel/schedules.py L418-419 @ d0b3b775). So the per-expert host
work is linear in the experts a GPU holds, two launches in six in the forward. Under
the fused grouped MLP (``ledger.step.eager.fused_grouped_mlp``: the op fuser with
NVTE_CUTEDSL_FUSED_GROUPED_MLP on an sm_10x GPU, an expert TP group of 1, in a recipe the
pinned TE fuses: MXFP8 alone at 4220403e, its one class ForwardGroupedMLP_CuTeGEMMSwiGLU_
MXFP8, ops/_common.py L245; MXFP8 or NVFP4 from TE 920a7db1 on - b9d690e0, 4329ff84,
d0067d0d: ``eager.FUSED_MLP_RECIPES_AT``; a Megatron-Bridge row by its release's TE,
``ledger.validation.bridge_stack.te_fused_mlp``) the experts' GEMMs are cuDNN's
CuTe DSL grouped kernels, one launch for all of them forward and backward (ops/fused/
forward_grouped_mlp.py L48-79, backward_grouped_mlp.py L252-287 @ 4220403e; ops/fused/
grouped_mlp.py @ d0067d0d), so no per-expert launch is priced there (``local_experts``;
the per-parameter bookkeeping that stays is not). Each is forward and backward together;
the backward launches two kernels for each of the forward's GEMMs (input and weight
gradient) and a gradient kernel for each elementwise one, so it takes 2/3 of it and the
forward 1/3.

Two ways of running a MoE layer stop its forward's host at the dispatch for longer than
the dispatcher's token counts: Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm)
runs each layer as five schedule nodes, each waiting on and recording a shared CUDA event,
switching streams, detaching its inputs and - in the backward - entering the autograd
engine on its own (pipeline_parallel/utils.py L181-345, models/common/
model_chunk_schedule_plan.py L137-176 and L236-301 at NVIDIA/Megatron-LM d98e8a64; the
feature's PR NVIDIA/Megatron-LM#2184: "EP Overlap brings extra cpu overhead"); and the
flex dispatcher on DeepEP's normal kernels, whose dispatch spins the CPU on the notify
kernel's receive counters before it can allocate its output (deepseek-ai/DeepEP
csrc/legacy/buffer.hpp L549-597 at dd758caf; Megatron's fused_a2a.py L106-108 "the CPU
will wait for GPU's signal") and whose expert-major reordering then syncs twice more on
the dispatch's output (``_indices_to_multihot``: boolean-mask indexing and
``repeat_interleave`` without an output size, token_dispatcher.py L1337-1365, called at
L1424-1433 unless --enable-experimental with permute fusion, which the Megatron-Bridge
Qwen3 recipes leave off). ``host_stall_s`` is what such a forward loses, once per MoE
layer: both stop at the same point, the forward's dispatch (under EP overlap with DeepEP
the dispatch node is DeepEP's dispatch), so a layer that has both pays it once
(``stalls``); fitted by benchmarks/fit.py stage 3 with the four. DeepEP's forward also
waits for the dispatch's all-to-all itself before it launches the experts (``host_excess_s``).

The five are an x86 host's (DGX / HGX: Xeon Platinum 8480C, 8570). A Grace host (Arm
Neoverse V2: GH200, the GB200 / GB300 NVL72 trays; ``System.host_cpu``,
``ledger.system.HOST_CPU_SOURCES``) takes ``grace_host_scale`` times them, one declared
constant fitted by benchmarks/fit.py stage 5 on the same calibration rows: the published
measurements of the two hosts' launch overhead disagree too widely to set it (PyTorch's
``nn.Linear`` forward 37.08 us of CPU on GB200 against 13.48 us on a Xeon 8480C DGX H100,
NVIDIA/TransformerEngine#2053, 2.75x; an ``OpOverload`` call's overhead 126 ns on GB200
against 111 ns on H100, pytorch/pytorch#187862, 1.14x).
"""
from __future__ import annotations

import numpy as np

from ledger.placement.layers import recomputed_share

FORWARD_SHARE = 1.0 / 3.0  # of a block's host seconds: the forward; the backward the rest


def for_host(cal, system):
    """``cal`` with the host's seconds per block of ``system``'s host CPU: a Grace host's
    ``grace_host_scale`` times the x86 host's."""
    from dataclasses import replace

    g = cal.grace_host_scale if getattr(system, "host_cpu", "x86") == "grace" else 1.0
    if g == 1.0:
        return cal
    return replace(cal, host_block_s=g * cal.host_block_s, host_router_s=g * cal.host_router_s,
                   host_moe_s=g * cal.host_moe_s, host_expert_s=g * cal.host_expert_s,
                   host_stall_s=g * cal.host_stall_s)


def _block_s(scopes: tuple, cal, local_experts=0) -> dict:
    """Host seconds, forward + backward, of each block kind under the captured scopes;
    ``local_experts``: the routed experts one GPU holds."""
    if "full_iteration" in scopes:
        return dict.fromkeys(("attn", "mamba", "mlp", "router", "moe"), 0.0)
    router = sum(0.5 for s in ("moe_router", "moe_preprocess") if s not in scopes)
    return {"attn": 0.0 if "attn" in scopes else cal.host_block_s,
            "mamba": 0.0 if "mamba" in scopes else cal.host_block_s,
            "mlp": 0.0 if "mlp" in scopes else cal.host_block_s,
            "router": router * cal.host_router_s,
            "moe": 0.0 if "moe" in scopes else cal.host_moe_s
            + cal.host_expert_s * local_experts}


def local_experts(model, cfg, gpu=None):
    """Routed experts one GPU holds whose GEMMs the host launches one by one: num_experts /
    ep (0 for a dense model), none under the fused grouped MLP on ``gpu`` (module docstring:
    its grouped kernels take every expert in one launch; ``ledger.step.eager.
    fused_grouped_mlp``, an array on the planner's grid)."""
    if not model.is_moe:
        return 0.0
    n = model.num_experts / cfg.ep
    if gpu is None:
        return n
    from ledger.step.eager import fused_grouped_mlp

    return n * (1 - np.asarray(fused_grouped_mlp(model, cfg, gpu), dtype=float))


def layer_host_s(model, cfg, cal, gpu=None) -> float:
    """Host seconds of one layer's forward and backward for one micro-batch, averaged over
    the stack (each kind of layer weighted by how many layers are of it)."""
    blocks = _block_s(tuple(getattr(cfg, "cuda_graph", ())), cal,
                      local_experts(model, cfg, gpu))
    total = 0.0
    for kind, n in model.kind_counts.items():
        # every mixer is one block: attention's, or a recurrent one's ("mamba" scope)
        t = blocks["mamba" if "mamba" in kind.mixer and "attention" not in kind.mixer
                   else "attn"]
        if kind.mlp == "dense":
            t = t + blocks["mlp"]  # not +=: the blocks may be a fit's arrays of constants
        elif kind.mlp != "none":
            t = t + (blocks["router"] + blocks["moe"])
        total = total + n * t
    return total / model.layers


def deepep_waits(cfg) -> bool:
    """The flex dispatcher on DeepEP's normal kernels: the CPU waits inside the dispatch for
    the receive counts, and again on its output before the experts (module docstring)."""
    from ledger.config import dispatcher
    from ledger.step.ep_sms import ep_backend

    return dispatcher(cfg) == "flex" and ep_backend(cfg) == "deepep"


def stalls(model, cfg):
    """Whether a MoE layer's forward stops its host at the dispatch beyond the token counts
    (``host_stall_s``, once per layer): combined 1F1B's schedule nodes (EP overlap) or
    DeepEP's normal dispatch, the MoE block eager (a captured block launches no node and
    DeepEP's wait cannot be captured). An array where ``cfg.ep_overlap`` is (the planner)."""
    import numpy as np

    scopes = tuple(getattr(cfg, "cuda_graph", ()))
    if not model.is_moe or "moe" in scopes or "full_iteration" in scopes:
        return np.asarray(False)
    return np.asarray(getattr(cfg, "ep_overlap", False), dtype=bool) | deepep_waits(cfg)


def stall_s(model, cfg, cal):
    """Host seconds ``host_stall_s`` adds to one layer's forward (averaged over the stack)."""
    return cal.host_stall_s * model.moe_layers / model.layers * stalls(model, cfg)


def host_passes_s(model, cfg, cal, gpu=None) -> tuple[float, float]:
    """(forward, backward) host seconds of one layer for one micro-batch: the blocks'
    launches, a third in the forward, and the forward's stall at the dispatch."""
    t = layer_host_s(model, cfg, cal, gpu)
    return FORWARD_SHARE * t + stall_s(model, cfg, cal), (1.0 - FORWARD_SHARE) * t


def launched_s(model, cfg, cal, gpu=None) -> tuple[float, float]:
    """(forward, backward) host seconds of one layer for one micro-batch as the step runs
    them: full recompute launches the forward's kernels again in the backward."""
    host_f, host_b = host_passes_s(model, cfg, cal, gpu)
    if cfg.recompute == "full":  # of the layers it recomputes (recomputed_share)
        host_b = host_b + host_f * recomputed_share(model, cfg)
    return host_f, host_b


def syncs(model, cfg) -> bool:
    """The forward stops the host once per MoE layer: routing whose expert inputs are not
    padded to a capacity (``MoESpec.pad_to_capacity``) and whose expert part is not
    captured in a graph (the "moe" scope is drop-and-pad only)."""
    scopes = tuple(getattr(cfg, "cuda_graph", ()))
    moe = getattr(cfg, "moe", None)
    dropless = moe is None or not getattr(moe, "pad_to_capacity", False)
    return bool(model.is_moe and dropless and "moe" not in scopes
                and "full_iteration" not in scopes)


def host_excess_s(model, cfg, cal, gpu_f, gpu_b, gpu_after_f, dispatch_f=0.0, gpu=None):
    """Seconds the host adds to one layer's forward and backward (averaged over the stack)
    beyond the GPU's ``gpu_f`` / ``gpu_b``. The backward never stops the host (it reuses
    the forward's token counts), so it takes max(GPU, host). A forward that syncs runs in
    two segments the host cannot overlap: up to the dispatcher's token counts, and the
    routed experts after them (``gpu_after_f``: their GEMMs and all-to-alls), each
    max(GPU, host) - the host's work after the sync cannot hide under the GPU's before it;
    the forward's stall (``stall_s``) is host time of the second. Under DeepEP
    (``deepep_waits``) the second starts only when the dispatch's all-to-all
    (``dispatch_f`` of the GPU's seconds after the sync) has landed: the host launches
    nothing while it runs.
    """
    import numpy as np

    host_f, host_b = launched_s(model, cfg, cal, gpu)
    over_b = np.maximum(0.0, host_b - gpu_b)
    if not syncs(model, cfg):
        return np.maximum(0.0, host_f - gpu_f), over_b
    share = model.moe_layers / model.layers
    blocks = _block_s(tuple(getattr(cfg, "cuda_graph", ())), cal,
                      local_experts(model, cfg, gpu))
    h_after = FORWARD_SHARE * blocks["moe"] * share + stall_s(model, cfg, cal)
    wait = dispatch_f * deepep_waits(cfg)
    t = (np.maximum(host_f - h_after, gpu_f - gpu_after_f) + wait
         + np.maximum(h_after, gpu_after_f - wait))
    return t - gpu_f, over_b
