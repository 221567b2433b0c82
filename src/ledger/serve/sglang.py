"""SGLang's memory plan beside vLLM's (``--engine sglang``): a static fraction of the GPU
for the weights and one token pool, the rest left for activations and CUDA graphs.

SGLang is read at commit 0a6356ae56187a7977bdbe6df3a9016b23ae32a1 of sgl-project/sglang
(as the BBuf/sglang fork holds it) for ``python/sglang/srt/server_args.py``
(``ServerArgs._handle_gpu_memory_settings``), and at
001ccef0072a4537d4ec6bdd50a73e6feb2c907d for
``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``
(``get_cell_size_per_token``, ``profile_max_num_token``, ``init_memory``).

``--mem-fraction-static`` unset, SGLang reserves, in MB of the GPU's memory (gpu_mem):

    reserved = 512                                  constant metadata (attention backend)
             + max(chunked_prefill_size, 2048) x 1.5   activations of a large prefill
             + cuda_graph_max_bs x 2                CUDA graph buffers
             + tp x pp / 8 x 1024                   large parallel sizes
             + cuda_graph_max_bs x dp x 3 (and x 1.5 more above bs 300)   DP attention
             + piecewise CUDA graphs: 8 a captured size, or 1,536 with an MLA backend
    reserved = max(reserved, 10,240) on GPUs above 60 GB
    mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)

with chunked_prefill_size 8,192 and cuda_graph_max_bs 256 (tp < 4) or 512 on 60-160 GB
GPUs (H100, H200), 16,384 and 512 above (B200, MI300), 4,096 and 32 / 160 on 35-60 GB,
2,048 below; --chunked-prefill-size -1 (chunked prefill off) reserves for
max_prefill_tokens (16,384) instead and, without MLA, captures no piecewise graphs. The
token pool is what is left of that fraction once the weights are loaded:

    rest = free after the weights - total x (1 - mem_fraction_static)
    max_total_num_tokens = rest // cell_size

gpu_mem is nvidia-smi's memory.total (get_nvgpu_memory_capacity: 81,559 MiB on an H100
80 GB, the preset's hbm_bytes), but both terms of rest are CUDA's: get_available_gpu_memory
reads torch.cuda.mem_get_info's free memory, the total being what was free before the
weights (model_runner's min_per_gpu_memory, init_memory(total_gpu_memory)). The ledger
takes CUDA's total for it, as vLLM's budget does (``ledger.system.chips.cuda_total_bytes``,
79.18 GiB on the H100), so rest = CUDA total x mem_fraction_static - weights, high by the
CUDA context and NCCL's buffers, which are not free at start-up either.

a cell being one token of every layer's cache on this GPU: MLA's kv_lora_rank +
qk_rope_head_dim, else kv_heads / attention-tp x (head_dim + v_head_dim), in the cache's
dtype. Requests share the pool token by token (page size 1; no per-layer blocks), so one
request of the context takes ``context`` tokens; ``max_running_requests`` defaults to
min(max(pool / context_len x 512, 2048), 4096).

>>> from ledger.model import llama3_8b
>>> from ledger.system import system
>>> p = plan(llama3_8b(), 1, 1, system("h100-sxm").gpu, 16.06e9, 32, 8192, 2)
>>> p.cuda_graph_max_bs, p.chunked_prefill_size, p.mem_fraction_static
(256, 8192, 0.83)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.serve.cache import NVFP4_KV, kv_heads_per_gpu
from ledger.system.chips import cuda_total_bytes

SGLANG_COMMIT = "0a6356ae56187a7977bdbe6df3a9016b23ae32a1"  # server_args.py
SGLANG_POOL_COMMIT = "001ccef0072a4537d4ec6bdd50a73e6feb2c907d"  # kv-cache mixin
MB = 2**20
MAX_PREFILL_TOKENS = 16384  # ServerArgs.max_prefill_tokens' default (server_args.py L397)


@dataclass(frozen=True)
class SGLangPlan:
    """One GPU's memory as SGLang plans it at start-up."""

    gpu_mem_mb: float  # the GPU's memory as SGLang reads it, MB
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    reserved_mb: float  # what the default fraction leaves out (None given: computed)
    mem_fraction_static: float
    weights_bytes: float
    cell_bytes: int  # one token of every layer's cache on this GPU
    pool_bytes: float  # the token pool
    max_total_num_tokens: int
    max_running_requests: int
    context: int
    total_bytes: float = 0.0  # what the pool's fraction is of: CUDA's total (cuda_total_bytes)

    @property
    def max_concurrency(self) -> float:
        """Requests of ``context`` tokens the pool holds at once."""
        return self.max_total_num_tokens / self.context

    @property
    def starts(self) -> bool:
        return self.max_total_num_tokens >= self.context


def gpu_defaults(gpu_mem_mb: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) for the GPU's memory
    (_handle_gpu_memory_settings' tiers)."""
    if gpu_mem_mb < 20 * 1024:
        return 2048, 8
    if gpu_mem_mb < 35 * 1024:
        return 2048, 24 if tp < 4 else 80
    if gpu_mem_mb < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_mb < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def chunk_size(gpu_mem_mb: float, tp: int, given: int | None = None) -> int:
    """SGLang's chunked_prefill_size: the one given (--chunked-prefill-size; -1 turns
    chunked prefill off), else the GPU's tier (_handle_gpu_memory_settings sets the tier's
    only where it is None)."""
    return given if given is not None else gpu_defaults(gpu_mem_mb, tp)[0]


def piecewise_sizes(max_tokens: int) -> int:
    """How many token counts SGLang captures piecewise CUDA graphs for, up to
    ``max_tokens`` (_generate_piecewise_cuda_graph_tokens)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return sum(1 for s in sizes if s <= max_tokens)


def reserved_mb(gpu_mem_mb: float, tp: int, pp: int, mla: bool, chunk: int,
                graph_bs: int) -> float:
    """MB SGLang's default mem_fraction_static leaves for activations and CUDA graphs
    (DP attention's terms are not modelled: ``plan`` takes no DP). Piecewise CUDA graphs
    are on unless pp > 1 turns them off (_handle_piecewise_cuda_graph); without MLA they
    capture token counts up to the chunk, 8 MB each (none at -1, chunked prefill off,
    whose activations are max_prefill_tokens' instead, 16,384 by default)."""
    prefill = chunk if chunk > 0 else MAX_PREFILL_TOKENS
    out = 512 + max(prefill, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if pp == 1:
        out += 1.5 * 1024 if mla else piecewise_sizes(chunk) * 8
    if gpu_mem_mb > 60 * 1024:
        out = max(out, 10 * 1024)
    return out


def cell_bytes(model, tp: int, layers: int, kv_bytes) -> int:
    """One token of ``layers`` layers' cache on one GPU (get_cell_size_per_token): MLA's
    latent and rotary key, or K and V of this GPU's KV heads; under NVFP4 (an fp4 pool,
    --kv-cache-dtype nvfp4) half a byte each and an fp8 scale per 16 of the latent, or of
    K's width for K and V alike (the mixin's kv_scale_buffer branches at 001ccef0; the
    dtype's choice: configure_kv_cache_dtype, mem_cache/kv_cache_dtype.py L77-79 at
    10a75eae)."""
    if model.attention == "mla":
        width = model.kv_lora_rank + model.qk_rope_head_dim
        if kv_bytes == NVFP4_KV:
            return width * layers // 2 + width // 16 * layers
        return width * layers * kv_bytes
    heads = kv_heads_per_gpu(model, tp)
    if kv_bytes == NVFP4_KV:
        return (heads * (model.head_dim + model.v_head_dim) * layers // 2
                + heads * model.head_dim * layers * 2 // 16)
    return heads * (model.head_dim + model.v_head_dim) * layers * kv_bytes


def plan(model, tp: int, pp: int, gpu, weights_bytes: float, layers: int, context: int,
         kv_bytes: int, mem_fraction_static: float | None = None,
         chunked_prefill_size: int | None = None) -> SGLangPlan:
    """SGLang's plan for one GPU holding ``weights_bytes`` and ``layers`` layers (its
    pipeline stage's). A --chunked-prefill-size given is kept over the GPU's tier
    (_handle_gpu_memory_settings sets the tier's only where it is None) and sizes the
    prefill's reserve and the piecewise graphs alike."""
    if model.sliding_window is not None or model.is_hybrid:
        raise LedgerError("engine", f"SGLang's pools for sliding-window and recurrent layers "
                                    f"(SWAKVPool, HybridLinearKVPool) are not modelled; "
                                    f"{model.name} has them")
    gpu_mem = gpu.hbm_bytes / MB
    graph_bs = gpu_defaults(gpu_mem, tp)[1]
    chunk = chunk_size(gpu_mem, tp, chunked_prefill_size)
    reserve = reserved_mb(gpu_mem, tp, pp, model.attention == "mla", chunk, graph_bs)
    fraction = mem_fraction_static if mem_fraction_static is not None \
        else round((gpu_mem - reserve) / gpu_mem, 3)
    if fraction <= 0:  # SGLang's default fraction would leave nothing: it cannot start
        field = "chunked_prefill_size" if chunked_prefill_size not in (None, -1) else "gpu"
        raise LedgerError(field, f"a prefill chunk of {chunk:,} tokens makes SGLang reserve "
                                 f"{reserve:,.0f} MiB for activations and CUDA graphs, more "
                                 f"than the GPU's {gpu_mem:,.0f} MiB (its default "
                                 f"mem_fraction_static would be {fraction:g}); give a smaller "
                                 f"--chunked-prefill-size")
    cell = cell_bytes(model, tp, layers, kv_bytes)
    total = cuda_total_bytes(gpu)  # CUDA's free at start-up, not nvidia-smi's figure
    rest = total * fraction - weights_bytes
    tokens = math.floor(rest / cell) if rest > 0 else 0
    running = min(max(int(tokens / context * 512), 2048), 4096)
    return SGLangPlan(gpu_mem, chunk, graph_bs, reserve, fraction, weights_bytes, cell,
                      max(rest, 0.0), tokens, running, context, total)
