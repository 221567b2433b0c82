"""How one model is served: the layout (``ServeConfig``) and the engine's settings as vLLM
resolves them (``Engine``), each default with its source.

vLLM is read at commit 9aaf83ef502fc37bc647f6e474314d48ba36cd1c (2026-05-19, "[CI failure]
Temporarily disable using persistent cache for flashinfer autotune (#43119)"); every
``file:line`` in ``ledger.serve`` is at that commit, paths relative to the vllm repository.

>>> cfg = ServeConfig(tp=8, context=8192)
>>> cfg.gpu_memory_utilization, cfg.world
(0.92, 8)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.errors import LedgerError, require_positive
from ledger.serve.cache import KV_DTYPES
from ledger.serve.paging import align_hybrid
from ledger.serve.state import STATE_DTYPES

VLLM_COMMIT = "9aaf83ef502fc37bc647f6e474314d48ba36cd1c"
# CacheConfig.gpu_memory_utilization: Field(default=0.92) (vllm/config/cache.py:66; 0.9
# before PR #38284, commit 96a85c5750, which also began subtracting the CUDA-graph estimate)
GPU_MEMORY_UTILIZATION = 0.92
BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE (vllm/config/cache.py:45, applied :230-231)
WEIGHT_BYTES = 2  # bf16: the weights of an unquantized checkpoint, and every module a
#                   quantization method leaves alone (ledger.serve.quant)
GiB = 2**30


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """One serving layout and the engine flags a user sets; None takes vLLM's default."""

    tp: int = 1  # --tensor-parallel-size
    pp: int = 1  # --pipeline-parallel-size
    dp: int = 1  # --data-parallel-size: engine replicas (MoE layers span them)
    ep: int = 1  # 1, or tp x dp: --enable-expert-parallel puts whole experts on each GPU
    context: int  # --max-model-len: the longest sequence a request may reach, tokens
    batch: int = 1  # sequences decoded together, for the time per token
    kv_dtype: str = "bf16"  # --kv-cache-dtype: auto (the model's bf16) or fp8
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes: skips the profile
    block_size: int | None = None  # --block-size; None: 16
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the GPU
    max_num_seqs: int | None = None  # None: vLLM's default for the GPU
    hybrid_manager: bool | None = None  # None: on, unless the model has chunked layers
    mamba_cache_dtype: str = "auto"  # --mamba-cache-dtype: recurrent states (auto: bf16)
    mamba_ssm_cache_dtype: str = "auto"  # --mamba-ssm-cache-dtype: their ssm part
    non_torch_bytes: float | None = None  # vLLM's measured non-torch increase (NCCL,
    #                                       cuBLAS); None: one logged on this GPU and tp
    #                                       (ledger.serve.budget.NON_TORCH_BYTES), else 0
    cudagraph_bytes: float | None = None  # vLLM's CUDA-graph estimate as its log gives it;
    #                                       None: ledger.serve.graphs' model of it; 0: vLLM
    #                                       before v0.21 or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0
    enforce_eager: bool = False  # --enforce-eager: no CUDA graphs, nothing estimated
    quant: object = None  # ledger.serve.quant.Quant: how the weights are stored (None: bf16)
    mxfp4_backend: str | None = None  # MXFP4 MoE kernels (None: vLLM's for the GPU)
    sampler: str = "flashinfer"  # top-k / top-p kernels the profile's sampler pass runs:
    #                              "flashinfer" (this commit's default), "native" (the
    #                              Triton kernel) or "sort" (the PyTorch sort of vLLM
    #                              before PR #33538; ledger.serve.budget.SAMPLER_BYTES)
    engine: str = "vllm"  # "vllm", or "sglang": its memory plan (ledger.serve.sglang)
    mem_fraction_static: float | None = None  # SGLang's --mem-fraction-static (None: its
    #                                           default for the GPU)
    chunked_prefill_size: int | None = None  # SGLang's --chunked-prefill-size (None: its
    #                                          default for the GPU, ledger.serve.sglang;
    #                                          -1: chunked prefill off)

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "ep", "context", "batch"):
            require_positive(f, getattr(self, f))
        for f in ("block_size", "max_num_batched_tokens", "max_num_seqs",
                  "kv_cache_memory_bytes"):
            if getattr(self, f) is not None:
                require_positive(f, getattr(self, f))
        if self.chunked_prefill_size not in (None, -1):  # -1: SGLang's chunked prefill off
            require_positive("chunked_prefill_size", self.chunked_prefill_size)
        if self.kv_dtype not in KV_DTYPES:
            raise LedgerError("kv_dtype", f"must be one of {', '.join(KV_DTYPES)}, "
                                          f"got {self.kv_dtype!r}")
        for f in ("mamba_cache_dtype", "mamba_ssm_cache_dtype"):
            if getattr(self, f) not in STATE_DTYPES:
                raise LedgerError(f, f"must be one of {', '.join(STATE_DTYPES)}, got "
                                     f"{getattr(self, f)!r}")
        u = self.gpu_memory_utilization
        if not (isinstance(u, (int, float)) and 0 < u <= 1):
            raise LedgerError("gpu_memory_utilization", f"must lie in (0, 1], got {u!r}")
        for f in ("non_torch_bytes", "cudagraph_bytes"):
            v = getattr(self, f)
            if v is None:
                continue
            if not (math.isfinite(v) and v >= 0):
                raise LedgerError(f, f"must be a finite number >= 0, got {getattr(self, f)!r}")
        if self.engine not in ("vllm", "sglang"):
            raise LedgerError("engine", f"must be vllm or sglang, got {self.engine!r}")
        f = self.mem_fraction_static
        if f is not None and not (isinstance(f, (int, float)) and 0 < f <= 1):
            raise LedgerError("mem_fraction_static", f"must lie in (0, 1], got {f!r}")
        if self.engine == "sglang" and self.dp > 1:
            raise LedgerError("dp", f"SGLang's data parallelism (--dp with "
                                    f"--enable-dp-attention) is not modelled; got dp "
                                    f"{self.dp} with --engine sglang")
        if self.mxfp4_backend not in (None, "triton", "marlin", "flashinfer"):
            raise LedgerError("mxfp4_backend", f"must be triton, marlin or flashinfer, got "
                                               f"{self.mxfp4_backend!r}")
        if self.sampler not in ("flashinfer", "native", "sort"):
            raise LedgerError("sampler", f"must be flashinfer, native or sort, got "
                                         f"{self.sampler!r}")
        if self.ep not in (1, self.tp * self.dp):
            raise LedgerError("ep", f"vLLM's expert parallelism spans every GPU of tp x dp: "
                                    f"ep must be 1 or tp({self.tp}) * dp({self.dp}) = "
                                    f"{self.tp * self.dp}, got {self.ep}")

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    # ---- the expert grid, as ledger.placement reads it ---------------------------
    @property
    def etp(self) -> int:
        """vLLM shards the MoE layers over all tp x dp GPUs of a stage: as tensor parallel
        without EP, whole experts with it (FusedMoEParallelConfig.make,
        vllm/model_executor/layers/fused_moe/config.py:1175-1222 with
        flatten_tp_across_dp_and_pcp :1084-1092)."""
        return self.tp * self.dp // self.ep

    vp = 1  # a serving pipeline holds one stage per rank
    schedule = "1f1b"  # (read by ledger.placement.stages; no backward is scheduled)
    sequence_parallel = False


@dataclass(frozen=True)
class Engine:
    """vLLM's settings for one model on one GPU, defaults resolved."""

    block_size: int
    max_num_batched_tokens: int  # tokens one step schedules: the profile run's size
    max_num_seqs: int  # sequences one step schedules: the profile run's sampler rows
    hybrid_manager: bool  # per-kind KV groups (False: every local layer cached in full)
    kv_bytes: int  # bytes per cached element
    state_page_bytes: int | None = None  # a recurrent state's page, padded to the
    #                                      attention page (None: not padded)


def batch_defaults(gpu) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of ``vllm serve`` (the OpenAI API server)
    on this GPU: 8192 and 1024 on GPUs of 70 GiB or more other than the A100, else 2048
    and 256 (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py:2287-2306)."""
    if gpu.hbm_bytes >= 70 * GiB and "a100" not in gpu.name.lower():
        return 8192, 1024
    return 2048, 256


def engine(model, cfg: ServeConfig, gpu, caches: list | None = None) -> Engine:
    """The engine's settings: the user's, else vLLM's defaults. Unset, max_num_batched_tokens
    is capped at max_num_seqs x max_model_len and max_num_seqs at the result
    (arg_utils.py:2458-2486). The hybrid KV-cache manager is on by default
    (vllm/config/vllm.py:1480-1482) except for chunked local attention, where vLLM turns it
    off for a latency regression (vllm/config/vllm.py:1405-1425) unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (``hybrid_manager=True`` here).
    With ``caches`` (``ledger.serve.cache.layer_caches``) of attention and recurrent layers,
    the block size is raised until an attention page holds a state, and the state page
    padded to it (``ledger.serve.paging.align_hybrid``; vLLM may raise a --block-size the
    user gave, interface.py:503-506)."""
    tokens, seqs = batch_defaults(gpu)
    seqs = cfg.max_num_seqs or seqs
    if cfg.max_num_batched_tokens is None:
        tokens = min(seqs * cfg.context, tokens)
    else:
        tokens = cfg.max_num_batched_tokens
    if cfg.max_num_seqs is None:
        seqs = min(seqs, tokens)
    hybrid = cfg.hybrid_manager
    if hybrid is None:
        hybrid = not (model.sliding_window is not None and model.local_attention == "chunked")
    block, state_page = align_hybrid(caches or [], cfg.block_size or BLOCK_SIZE)
    return Engine(block, tokens, seqs, hybrid, KV_DTYPES[cfg.kv_dtype], state_page)
