"""One model served on one layout: ``serve(model, cfg, system)`` -> ``ServeEstimate``.

Weights per GPU (``weights``), each layer's KV cache (``cache``), the memory left for it
(``budget``) and vLLM's pool of pages over it (``paging``), the collectives per token
(``comms``) and the seconds (``timing``), per pipeline rank and for the engine.

>>> from ledger.model import llama3_70b
>>> from ledger.system import system
>>> est = serve(llama3_70b(), ServeConfig(tp=8, context=8192), system("h100-sxm"))
>>> est.kv_bytes_per_token, est.kv_bytes_per_sequence  # 80 layers x 512 B; x 8192
(40960, 335544320)
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.serve.budget import Budget, budgets
from ledger.serve.cache import KV_DTYPES, LayerCache, layer_caches
from ledger.serve.comms import ServeComm, layout, stage_rows
from ledger.serve.engine import WEIGHT_BYTES, Engine, ServeConfig, engine
from ledger.serve.margin import GraphMargin, margin
from ledger.serve.paging import Pool, cdiv, pool
from ledger.serve.qbytes import mxfp4_backend, quantized_active_params
from ledger.serve.sglang import MB, SGLangPlan, chunk_size, plan
from ledger.serve.state import state_dtypes
from ledger.serve.timing import call_s, decode_stage_s, prefill_compute_s
from ledger.serve.weights import (bytes_by_rank, check, lookup_params, params_by_rank,
                                  stage_ranges)


@dataclass(frozen=True)
class Stage:
    """One GPU of one pipeline rank."""

    rank: int
    layers: range
    weight_bytes: float
    kv_bytes_per_token: int  # what one more token of context adds (below any window)
    kv_bytes_per_sequence: int  # one sequence at the context, exactly what is kept
    budget: Budget
    comms: tuple[ServeComm, ...]
    decode_s: float  # this stage's share of one decode step, its collectives included


@dataclass(frozen=True)
class ServeEstimate:
    model: str
    cfg: ServeConfig
    engine: Engine
    caches: tuple[LayerCache, ...]  # every layer's cache on one GPU of its stage
    stages: tuple[Stage, ...]
    pool: Pool
    prefill_s: float  # one prompt of ``cfg.context`` tokens on an idle engine
    decode_s_per_token: float  # one decode step of ``cfg.batch`` sequences at the context
    mxfp4_backend: str = "triton"  # the MXFP4 MoE kernels whose layout the weights take
    sglang: tuple[SGLangPlan, ...] | None = None  # --engine sglang: each stage's plan
    graph_margin: GraphMargin | None = None  # the verdict over the CUDA-graph estimate's
    #                                         logged spread (None: no estimate modelled)
    prefill_chunk_tokens: int = 0  # tokens of the prompt one prefill pass takes
    #                                (``prefill_chunk``; the context when not chunked)

    @property
    def starts(self) -> bool:
        """Whether the engine starts: a request of the context fits its cache."""
        if self.sglang is not None:
            return all(p.starts for p in self.sglang)
        return self.pool.short is None

    @property
    def binding(self) -> Stage:
        """The stage whose memory sets the pool's blocks (vLLM keeps the fewest)."""
        return self.stages[self.pool.binding_worker]

    @property
    def weight_bytes_per_gpu(self) -> float:
        return max(s.weight_bytes for s in self.stages)

    @property
    def kv_bytes_per_token(self) -> int:
        return max(s.kv_bytes_per_token for s in self.stages)

    @property
    def kv_bytes_per_sequence(self) -> int:
        return max(s.kv_bytes_per_sequence for s in self.stages)

    @property
    def max_sequences(self) -> int:
        """Whole sequences of ``cfg.context`` tokens the pool holds at once (vLLM's
        maximum concurrency, rounded down; SGLang's token pool over the context), per
        engine replica."""
        if self.sglang is not None:
            return int(min(p.max_concurrency for p in self.sglang))
        return int(self.pool.max_concurrency)

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens one engine replica generates per second with its pipeline full: vLLM keeps
        pp batches in flight (max_concurrent_batches = pp,
        vllm/v1/executor/multiproc_executor.py:474-478), so pp x batch sequences decode
        at once, one token each per step."""
        return self.cfg.pp * self.cfg.batch / self.decode_s_per_token


def _comm_s(rows, system, tokens: float, sampled: float, passes: int) -> float:
    """A stage's collectives over ``passes`` forward passes sharing ``tokens`` tokens."""
    return passes * sum(call_s(r, system, tokens / passes, sampled / passes) for r in rows)


def prefill_chunk(cfg: ServeConfig, eng: Engine, gpu) -> int:
    """Tokens of one prompt a prefill pass takes, as the chosen engine chunks it: vLLM's
    max_num_batched_tokens (``engine``), SGLang's chunked_prefill_size (given, else its
    GPU tier, ``ledger.serve.sglang.chunk_size``); -1, SGLang's chunked prefill off, keeps
    the prompt in one forward (server_args.py L3453-3454 at sglang 0a6356ae)."""
    if cfg.engine == "sglang":
        chunk = chunk_size(gpu.hbm_bytes / MB, cfg.tp, cfg.chunked_prefill_size)
        return cfg.context if chunk == -1 else chunk
    return eng.max_num_batched_tokens


def serve(model, cfg: ServeConfig, system) -> ServeEstimate:
    """Weights, KV cache, concurrency, communication and time of one served model."""
    check(model, cfg)
    gpu = system.gpu
    dtypes = state_dtypes(model, cfg.mamba_cache_dtype, cfg.mamba_ssm_cache_dtype)
    caches = layer_caches(model, range(model.layers), cfg.tp, KV_DTYPES[cfg.kv_dtype], dtypes)
    eng = engine(model, cfg, gpu, caches)
    if cfg.engine == "vllm" and cfg.batch > eng.max_num_seqs:  # its scheduler's cap a step
        raise LedgerError("batch", f"batch({cfg.batch}) > max_num_seqs({eng.max_num_seqs}): "
                                   f"vLLM decodes at most max_num_seqs sequences a step; "
                                   f"give --max-num-seqs {cfg.batch} or a smaller --batch")
    ranges = stage_ranges(model.layers, cfg.pp)
    params = params_by_rank(model, cfg)
    backend = cfg.mxfp4_backend or mxfp4_backend(gpu.name)
    stored = bytes_by_rank(model, cfg, backend)
    weights = [dense + expert for dense, expert in stored]
    buds = budgets(model, cfg, eng, gpu, weights, ranges)
    kv_pool = pool(caches, [list(r) for r in ranges], [b.available_bytes for b in buds],
                   cfg.context, eng)
    lay = layout(cfg, system.gpus_per_node, system.gpus_per_domain)
    stages, b = [], cfg.batch
    for r, held in enumerate(ranges):
        mine = [caches[i] for i in held]
        per_seq = sum(c.bytes_at(cfg.context) for c in mine)
        rows = tuple(stage_rows(model, cfg, lay, held, r))
        dense, expert = params[r]
        looked_up = lookup_params(model, cfg, r)
        multiplied = (dense - looked_up, expert)
        read = (stored[r][0] - looked_up * WEIGHT_BYTES, stored[r][1])
        t = decode_stage_s(model, cfg, gpu, multiplied, per_seq, read) \
            + _comm_s(rows, system, b, b, 1)
        stages.append(Stage(r, held, weights[r], sum(c.bytes_per_token for c in mine), per_seq,
                            buds[r], rows, t))
    chunk = prefill_chunk(cfg, eng, gpu)
    chunks = cdiv(cfg.context, chunk)
    prefill = prefill_compute_s(model, cfg, gpu, cfg.context, sum(weights), chunk,
                                quantized_active_params(model, cfg.quant)) \
        + sum(_comm_s(s.comms, system, cfg.context, 1, chunks) for s in stages)
    plans, edge = None, margin(caches, [list(r) for r in ranges], buds, cfg.context, eng,
                               kv_pool)
    if cfg.engine == "sglang":
        plans = tuple(plan(model, cfg.tp, cfg.pp, gpu, weights[r],
                           sum(1 for i in held if model.layer_kind(i).attention),
                           cfg.context, KV_DTYPES[cfg.kv_dtype], cfg.mem_fraction_static,
                           cfg.chunked_prefill_size)
                      for r, held in enumerate(ranges))
        edge = None
    return ServeEstimate(model.name, cfg, eng, tuple(caches), tuple(stages), kv_pool, prefill,
                         sum(s.decode_s for s in stages), backend, plans, edge, chunk)
