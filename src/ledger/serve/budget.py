"""What is left for the KV cache on one GPU: vLLM's start-up budget.

vLLM asks for ``ceil(total memory x gpu_memory_utilization)`` (request_memory,
vllm/v1/worker/utils.py:403-423), runs one forward over ``max_num_batched_tokens``
dummy tokens and a sampler pass (the profile run), and gives the cache the rest
(Worker.determine_available_memory, vllm/v1/worker/gpu_worker.py:354-447):

    available = requested - (weights + torch peak increase + non-torch increase)
                - CUDA-graph estimate                              (gpu_worker.py:413-447)

or exactly ``--kv-cache-memory-bytes`` when given (gpu_worker.py:366-384). The weights
are ``ledger.serve.weights``; the torch peak is ``profile_activation_bytes`` below, an
estimate from the tensors the profile run allocates; the non-torch increase (NCCL and
custom all-reduce buffers, cuBLAS workspaces, CUDA modules) is measured by vLLM at
start-up: the figure given, else one logged on the same GPU and tensor-parallel size
(``NON_TORCH_BYTES``), else 0; the CUDA-graph estimate is ``ledger.serve.graphs``' model
of vLLM's (vLLM's graphs, two constants fitted on logged estimates) unless given, and 0
with ``--enforce-eager``. The torch peak is the profile's alone: vLLM reads it before the
CUDA-graph profiling (profile_torch_peak, gpu_worker.py:398-415 at v0.22.0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.serve.cache import kv_heads_per_gpu
from ledger.serve.engine import GiB, WEIGHT_BYTES
from ledger.serve.graphs import Graphs, graphs
from ledger.serve.state import RECURRENT
# vLLM's total is CUDA's (torch.cuda.mem_get_info, which request_memory reads): the
# system's figure, 79.18 GiB on an H100 80 GB, not nvidia-smi's 79.65
from ledger.system.chips import CUDA_TOTAL_BYTES, cuda_total_bytes  # noqa: F401


@dataclass(frozen=True)
class Budget:
    """One GPU's memory at vLLM's start-up, by cause, and what the KV cache gets."""

    hbm_bytes: float  # the GPU's memory (vLLM reads cudaMemGetInfo's total)
    requested_bytes: float  # ceil(hbm x gpu_memory_utilization)
    weights_bytes: float
    activation_bytes: float  # the profile run's torch peak increase (estimate)
    non_torch_bytes: float
    cudagraph_bytes: float
    given_bytes: float | None = None  # --kv-cache-memory-bytes: used as is
    graphs: Graphs | None = None  # the graphs the estimate counts (None: given, or eager)
    non_torch_logged: bool = False  # the non-torch figure is NON_TORCH_BYTES' measurement

    @property
    def available_bytes(self) -> float:
        if self.given_bytes is not None:
            return self.given_bytes
        return (self.requested_bytes - self.weights_bytes - self.activation_bytes
                - self.non_torch_bytes - self.cudagraph_bytes)


def requested_bytes(hbm_bytes: float, utilization: float) -> int:
    """vLLM's share of the GPU: math.ceil(total_memory x gpu_memory_utilization)
    (vllm/v1/worker/utils.py:408-410)."""
    return math.ceil(hbm_bytes * utilization)


def _attention_transient(model, tp: int) -> float:
    """Elements per token a layer's attention allocates at its widest: the fused QKV
    projection's output and the attention output (qkv_proj and attn in
    vllm/model_executor/models/llama.py:223-233, LlamaAttention.forward). MLA's prefill path
    decompresses: the queries, kv_b_proj's output (heads x (nope + v)) and the
    assembled keys (heads x (nope + rope)), all over this GPU's heads, and the output."""
    heads = model.heads / tp
    if model.attention == "mla":
        return heads * (2 * model.head_dim + model.qk_nope_head_dim + 2 * model.v_head_dim)
    kv = kv_heads_per_gpu(model, tp)
    return heads * model.head_dim + kv * (model.head_dim + model.v_head_dim) \
        + heads * model.v_head_dim


def _mlp_transient(model, cfg, moe: bool, tokens: int) -> float:
    """Elements an MLP allocates for ``tokens`` tokens at its widest. Dense: gate_up's
    output (2 x ffn / tp) and the activation's (ffn / tp) (LlamaMLP.forward,
    llama.py:117-121). MoE, the Triton experts' workspaces for M tokens routed top_k
    ways over I = moe_ffn / etp: (M, top_k, max(I, h)) + (M, top_k, max(2 I, h)) + the output (M, h)
    (TritonExperts.workspace_shapes, vllm/model_executor/layers/fused_moe/experts/
    triton_moe.py:132-147), with M the tokens of every DP rank once they are gathered
    (dispatch, vllm/distributed/device_communicators/all2all.py:49-81); plus the shared
    experts' MLP, which runs beside them."""
    if not moe:
        return tokens * 3 * model.ffn_hidden / cfg.tp
    h, k, width = model.expert_hidden, model.top_k, model.moe_ffn_hidden / cfg.etp  # vLLM's
    # FusedMoE at the latent width under LatentMoE (nemotron_h.py: hidden_size=moe_hidden_size)
    rows = tokens * cfg.dp
    experts = rows * k * (max(width, h) + max(2 * width, h)) + rows * h
    return experts + tokens * 3 * model.shared_ffn / cfg.tp


def _mixer_transient(model, tp: int, mixer: str) -> float:
    """Elements per token a recurrent mixer allocates at its widest, on one GPU: its input
    projection's output, split over tp as vLLM splits it - Mamba-1's x and z, Mamba-2's z,
    xBC and dt (MambaMixer2.forward's projected_states, mamba_mixer2.py), Gated DeltaNet's
    q, k, v, z and its beta and alpha, KDA's and lightning attention's q, k and v, LFM2's
    B, C and x."""
    if mixer in ("mamba", "attention+mamba"):
        return model.mamba.in_width / tp
    if mixer == "conv":
        return 3 * model.hidden / tp
    la = model.linear
    if la.kind == "gdn":
        return (2 * la.key_width + 2 * la.value_width + 2 * la.value_heads) / tp
    return 3 * la.value_width / tp


def _widest(model, cfg, tokens: int, layers: range) -> float:
    """The largest transient of one layer of ``layers`` for ``tokens`` tokens: its
    attention, its recurrent mixer or its MLP, whichever allocates most."""
    kinds = {model.layer_kind(i) for i in layers}
    out = [_mlp_transient(model, cfg, k.moe, tokens) for k in kinds if k.mlp != "none"]
    if any(k.attention for k in kinds):
        out.append(tokens * _attention_transient(model, cfg.tp))
    out += [tokens * _mixer_transient(model, cfg.tp, k.mixer) for k in kinds
            if k.mixer in RECURRENT]
    return max(out, default=0.0)


# Bytes a logit of the profile's sampler pass holds at its peak, by top-k / top-p path.
# _dummy_sampler_run gives every dummy request top_k = vocab - 1 and top_p = 0.9, so the
# top-k / top-p path always runs; it holds the gathered logits in the model's dtype (2) and
# Sampler.forward their fp32 copy (4) (vllm/v1/sample/sampler.py:91). vLLM's release
# sources v0.21.0 (9da56fd18) and v0.22.0 (0b3ba88f1), which bracket the pinned commit, are
# the same in every line cited here but for line numbers (file:line at v0.22.0).
# - "flashinfer" (vLLM's default since PR #40376, 2026-04-20): flashinfer_sample calls
#   top_k_top_p_sampling_from_logits, whose "top_k_first" order allocates the masked logits
#   (4) and their softmax (4) (flashinfer-ai/flashinfer v0.6.8.post1-v0.6.11.post2,
#   flashinfer/sampling.py, top_k_top_p_sampling_from_logits): 14 B a logit. The pinned
#   vLLM then calls the sampler a second time with a torch.Generator, "to warm
#   forward_native" (gpu_model_runner.py:5954-5973), which takes the native path below.
# - "native" (VLLM_USE_FLASHINFER_SAMPLER=0): forward_native masks in place with the Triton
#   top-k / top-p kernel for >= 8 rows (apply_top_k_top_p, topk_topp_sampler.py:321; PR
#   #33538, opened 2026-02-02), then holds the softmax (4, :129) and random_sample's exponential
#   draws (4, :404): 14 B a logit, beside the kernel's buffer (``topk_topp_buffer_bytes``).
# - "sort" (vLLM before PR #33538: the 0.10-0.11 start-ups users logged, and llm-d's):
#   apply_top_k_top_p_pytorch sorts the whole vocabulary, and its peak is inside the sort:
#   torch.sort's fp32 values (4) and int64 indices (8); for >= 128 rows shorter than 10^6
#   PyTorch's segmented_sort_pairs allocates an int64 index per element (8) (pytorch/pytorch
#   061531e8, aten/src/ATen/native/cuda/SortStable.cu, do_launch_stable_sort_kernel and
#   segmented_sort_pairs), and CUB's DeviceSegmentedRadixSort::SortPairs, called without a
#   DoubleBuffer, passes is_overwrite_okay = false and so takes a third key and value buffer
#   (4 + 8) as temporary storage (NVIDIA/cub 0fc3c370,
#   cub/device/device_segmented_radix_sort.cuh:237-257;
#   cub/device/dispatch/dispatch_radix_sort.cuh:2285-2290): 38 B a logit, 7.3 GiB for
#   1,024 rows of gpt-oss's 201,088-token vocabulary. Held to the torch peak increases a
#   vLLM start-up logged for four text models on one H100 (llm-d-benchmark,
#   tests/test_serve_quant.py).
SAMPLER_BYTES = {"flashinfer": 2 + 4 + 4 + 4, "native": 2 + 4 + 4 + 4,
                 "sort": 2 + 4 + (4 + 8) + 8 + (4 + 8)}


def topk_topp_buffer_bytes(rows: int, vocab: int, sms: int, sampler: str) -> int:
    """The Triton top-k / top-p kernel's per-program buffer, kept for the process once the
    profile's native pass allocates it: min(next_power_of_2(min(SMs, rows)), SMs) rows of
    the vocabulary in fp32 (apply_top_k_top_p_triton, vllm/v1/sample/ops/topk_topp_triton.py:
    1015-1024 at v0.22.0: NUM_PROGRAMS = min(num_sm, batch), ``logits.new_empty((size,
    vocab))`` cached in _TRITON_BUFFER_CACHE; PR #33538: "around ~80MiB of extra VRAM").
    Both the default and the native sampler reach it; the older sort does not."""
    if sampler == "sort" or rows < 8:  # fewer rows take the PyTorch sort (:321)
        return 0
    programs = min(sms, rows)
    return min(1 << (programs - 1).bit_length(), sms) * vocab * 4


def profile_activation_bytes(model, cfg, eng, layers: range, last: bool,
                             sms: int) -> float:
    """The torch peak increase of vLLM's profile run on one GPU (an estimate). The run is
    ``_dummy_run(max_num_batched_tokens)`` then, on the last pipeline rank,
    ``_dummy_sampler_run`` over the last token of min(tokens, max_num_seqs) dummy requests
    (profile_run, vllm/v1/worker/gpu_model_runner.py:6163-6170 at v0.22.0). A forward
    without autograd holds the hidden states and the residual (2 x tokens x h) and, at its
    widest, one layer's attention, recurrent mixer or MLP intermediates (``_widest``); the
    sampler pass holds the forward's output (tokens x h, kept by profile_run), the gathered
    last tokens and their torch.rand_like copy (2 x rows x h, :5907 and :5923), the logits
    at ``SAMPLER_BYTES`` a logit and the Triton top-k / top-p buffer
    (``topk_topp_buffer_bytes``). Attention does not run in the profile (no metadata is
    built unless forced, :5714), so its kernels' workspaces are not in the peak; the
    compiler's buffer reuse is not modelled. ``sms``: the GPU's streaming multiprocessors."""
    tokens, a = eng.max_num_batched_tokens, WEIGHT_BYTES
    forward = (2 * tokens * model.hidden + _widest(model, cfg, tokens, layers)) * a
    if not last:
        return forward
    rows = min(tokens, eng.max_num_seqs)
    sampler = (tokens + 2 * rows) * model.hidden * a \
        + rows * model.vocab * SAMPLER_BYTES[cfg.sampler] \
        + topk_topp_buffer_bytes(rows, model.vocab, sms, cfg.sampler)
    return max(forward, sampler)


# The non-torch increase vLLM measures from before the model is created to after the
# profile (MemoryProfilingResult.non_torch_increase = CUDA's used memory less torch's
# reserved, vllm/utils/mem_utils.py:268 at v0.22.0: CUDA modules loaded lazily, cuBLAS and
# NCCL state), where start-ups logged it: on one H100 80 GB (llm-d/llm-d-benchmark
# 4f4d44943c, config_explorer/empirical-vllm-memory-results.md, "Non-torch Memory"), the
# median of each tensor-parallel size's start-ups: TP 1, nine start-ups of seven models
# (0.13 GiB five times, 0.14 four); TP 2, two (0.54, 0.55 GiB). Elsewhere none is known and
# 0 is taken, unless --non-torch-gib gives one.
NON_TORCH_BYTES = {("h100-sxm", 1): 0.13 * GiB, ("h100-sxm", 2): 0.545 * GiB}


def non_torch_bytes(cfg, gpu) -> tuple[float, bool]:
    """(bytes, measured here) of the non-torch increase: the user's figure, else the one
    logged on this GPU at this tensor-parallel size (one pipeline stage, one replica),
    else 0 (not measured)."""
    if cfg.non_torch_bytes is not None:
        return cfg.non_torch_bytes, False
    if cfg.pp == 1 and cfg.dp == 1 and (gpu.name, cfg.tp) in NON_TORCH_BYTES:
        return NON_TORCH_BYTES[(gpu.name, cfg.tp)], True
    return 0.0, False


def budgets(model, cfg, eng, gpu, weights: list[float], stages: list[range]) -> list[Budget]:
    """Each pipeline rank's budget (one GPU of it)."""
    total = cuda_total_bytes(gpu)
    requested = requested_bytes(total, cfg.gpu_memory_utilization)
    plan, graph_bytes = cudagraph_estimate(model, cfg, eng)
    other, logged = non_torch_bytes(cfg, gpu)
    out = []
    for r, (w, held) in enumerate(zip(weights, stages)):
        act = profile_activation_bytes(model, cfg, eng, held, r == len(stages) - 1, gpu.sms)
        out.append(Budget(total, requested, w, act, other, graph_bytes,
                          cfg.kv_cache_memory_bytes, plan, logged))
    return out


def cudagraph_estimate(model, cfg, eng) -> tuple[Graphs | None, float]:
    """What vLLM subtracts for CUDA graphs: nothing with --enforce-eager (the estimate is
    skipped, gpu_worker.py), the figure given (--cudagraph-gib), else the model of
    ``ledger.serve.graphs`` over the graphs vLLM's defaults capture."""
    if cfg.enforce_eager:
        return None, 0.0
    if cfg.cudagraph_bytes is not None:
        return None, cfg.cudagraph_bytes
    plan = graphs(model, eng.max_num_seqs, eng.max_num_batched_tokens)
    return plan, plan.estimate_bytes
