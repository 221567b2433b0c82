"""serve's inputs: the served checkpoint's stored format and the serving layout and engine
flags as a ``ServeConfig``, each flag the model or the engine would ignore refused.
"""
from __future__ import annotations

import argparse

from ledger.errors import LedgerError
from ledger.model import ModelSpec


def stored_format(a: argparse.Namespace, model: ModelSpec):
    """How the served checkpoint stores its weights: a config.json's own
    quantization_config, a preset's published checkpoint (``ledger.serve.checkpoints``),
    bf16 for a custom model or a launch file's (a training checkpoint)."""
    from ledger.model import PRESETS
    from ledger.serve.checkpoints import published

    if a.launch is not None or a.model is None or a.model == "custom":
        return None
    if a.model.lower() in PRESETS:
        return published(a.model)
    from ledger.io.hf.reader import read_hf_quant

    return read_hf_quant(a.model)


def serve_config(a: argparse.Namespace, model: ModelSpec):
    """The serving layout and engine flags as a ServeConfig; flags the model ignores, and a
    training length, are refused."""
    from ledger.serve import ServeConfig
    from ledger.serve.engine import GPU_MEMORY_UTILIZATION
    from ledger.serve.state import has_state

    if a.seq_len is not None:
        raise LedgerError("seq", "serve sizes a sequence by --context (vLLM's --max-model-len);"
                                 " --seq is a training length")
    ep = a.ep
    if a.enable_expert_parallel:
        if ep not in (1, a.tp * a.dp):
            raise LedgerError("ep", f"--enable-expert-parallel sets ep = tp({a.tp}) * dp({a.dp})"
                                    f" = {a.tp * a.dp}, got --ep {ep}")
        ep = a.tp * a.dp
    hybrid = None if a.hybrid_kv_cache_manager is None else a.hybrid_kv_cache_manager == "on"
    recurrent = has_state(model)
    if hybrid is True and model.sliding_window is None and recurrent:
        raise LedgerError("hybrid_kv_cache_manager", f"has no effect: vLLM's hybrid KV-cache "
                                                     f"manager is on for {model.name}'s "
                                                     f"recurrent layers")
    if hybrid is not None and model.sliding_window is None and not recurrent:
        raise LedgerError("hybrid_kv_cache_manager", f"has no effect: every layer of "
                                                     f"{model.name} caches every token")
    for flag in ("mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        if getattr(a, flag) is not None and not recurrent:
            raise LedgerError(flag, f"has no effect: {model.name} has no recurrent layer")
    from ledger.io import check_world

    check_world(tp=a.tp, pp=a.pp, dp=a.dp)
    from ledger.serve.quant import resolve

    quant = resolve(a.quantization, stored_format(a, model))
    kv_dtype = a.kv_dtype or kv_auto(quant, a.engine)
    if a.mem_fraction_static is not None and a.engine != "sglang":
        raise LedgerError("mem_fraction_static", "is SGLang's; give --engine sglang (vLLM's "
                                                 "share is --gpu-memory-utilization)")
    vllm = [f for f in VLLM_ONLY if getattr(a, f) not in (None, False)]
    if vllm and a.engine == "sglang":  # SGLang's plan (serve.sglang.plan) reads none of them
        raise LedgerError(vllm[0], f"sets vLLM's memory plan, which --engine sglang does not "
                                   f"run (SGLang's share is --mem-fraction-static); drop "
                                   f"--{vllm[0].replace('_', '-')}")
    return ServeConfig(quant=quant, mxfp4_backend=a.mxfp4_backend, engine=a.engine,
                       sampler=a.sampler or "flashinfer",
                       mem_fraction_static=a.mem_fraction_static, tp=a.tp, pp=a.pp,
                       dp=a.dp, ep=ep, context=a.context, batch=a.batch,
                       kv_dtype=kv_dtype, gpu_memory_utilization=GPU_MEMORY_UTILIZATION
                       if a.gpu_memory_utilization is None else a.gpu_memory_utilization,
                       kv_cache_memory_bytes=a.kv_cache_memory_bytes, block_size=a.block_size,
                       max_num_batched_tokens=a.max_num_batched_tokens,
                       max_num_seqs=a.max_num_seqs, hybrid_manager=hybrid,
                       mamba_cache_dtype=a.mamba_cache_dtype or "auto",
                       mamba_ssm_cache_dtype=a.mamba_ssm_cache_dtype or "auto",
                       non_torch_bytes=None if a.non_torch_gib is None
                       else a.non_torch_gib * 2**30,
                       cudagraph_bytes=None if a.cudagraph_gib is None
                       else a.cudagraph_gib * 2**30, enforce_eager=a.enforce_eager)


def kv_auto(quant, engine: str) -> str:
    """--kv-cache-dtype auto: vLLM takes the KV cache a ModelOpt checkpoint declares
    (``Quant.kv_cache``), else the model's bf16; SGLang's auto is counted as the model's
    bf16 (its resolution is not read here). An NVFP4 KV cache is not modelled: refused
    in one line, unless the flag names a dtype."""
    kv = getattr(quant, "kv_cache", None) if engine == "vllm" else None
    if kv == "nvfp4":
        raise LedgerError("kv_cache_dtype", f"the checkpoint declares an NVFP4 KV cache "
                                            f"({quant.source}), which vLLM's auto takes and "
                                            f"the ledger does not model; give "
                                            f"--kv-cache-dtype fp8 or bf16")
    return kv or "bf16"


# serve flags only vLLM's memory plan reads (the pool, its profile run, its CUDA graphs)
VLLM_ONLY = ("gpu_memory_utilization", "kv_cache_memory_bytes", "block_size", "max_num_seqs",
             "sampler", "non_torch_gib", "cudagraph_gib", "enforce_eager")
