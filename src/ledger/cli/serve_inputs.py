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
    # on one GPU ep stays 1, so the core's refusal of ep > 1 without experts cannot name it
    if a.enable_expert_parallel and not model.is_moe and a.tp * a.dp == 1:
        raise LedgerError("enable_expert_parallel", f"has no effect: {model.name} has no "
                                                    f"experts (vLLM's EP places MoE layers)")
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
    _check_context(a)
    from ledger.serve.quant import resolve

    quant = resolve(a.quantization, stored_format(a, model))
    kv_dtype, fallback = (a.kv_dtype, None) if a.kv_dtype else kv_auto(quant, a.engine)
    a.serve_unpriced = [fallback] if fallback else []
    if kv_dtype == "nvfp4" and a.engine == "vllm" and model.attention == "mla":
        raise LedgerError("kv_cache_dtype", f"nvfp4 on {model.name}'s MLA cache: vLLM's "
                                            f"MLAAttentionSpec packs no NVFP4 (only "
                                            f"fp8_ds_mla, kv_cache_interface.py at 001cabc1), "
                                            f"not modelled; give --kv-cache-dtype fp8 or bf16")
    if a.mem_fraction_static is not None and a.engine != "sglang":
        raise LedgerError("mem_fraction_static", "is SGLang's; give --engine sglang (vLLM's "
                                                 "share is --gpu-memory-utilization)")
    if a.mxfp4_backend is not None and getattr(quant, "method", None) != "mxfp4":
        raise LedgerError("mxfp4_backend", f"has no effect: {model.name}'s weights are "
                                           f"{getattr(quant, 'label', None) or 'bf16'}, not "
                                           f"MXFP4 (the backend lays out MXFP4 experts only)")
    profiled = [f for f in PROFILED if getattr(a, f) is not None]
    if a.kv_cache_memory_bytes is not None and profiled:
        raise LedgerError(profiled[0], f"has no effect with --kv-cache-memory-bytes "
                                       f"{a.kv_cache_memory_bytes}: vLLM sizes the KV cache "
                                       f"from it, not from the profile's budget (it ignores "
                                       f"gpu_memory_utilization: vllm/config/cache.py at "
                                       f"002f10e0); drop --{profiled[0].replace('_', '-')}")
    if a.max_num_batched_tokens is not None and a.engine == "sglang":
        raise LedgerError("max_num_batched_tokens", f"is vLLM's; SGLang's tokens per prefill "
                                                    f"chunk are --chunked-prefill-size (give "
                                                    f"--chunked-prefill-size "
                                                    f"{a.max_num_batched_tokens})")
    if a.chunked_prefill_size is not None and a.engine != "sglang":
        tokens = a.context if a.chunked_prefill_size == -1 else a.chunked_prefill_size
        raise LedgerError("chunked_prefill_size", f"is SGLang's; give --engine sglang, or "
                                                  f"vLLM's --max-num-batched-tokens {tokens}")
    vllm = [f for f in VLLM_ONLY if getattr(a, f) not in (None, False)]
    if vllm and a.engine == "sglang":  # SGLang's plan (serve.sglang.plan) reads none of them
        raise LedgerError(vllm[0], f"sets vLLM's memory plan, which --engine sglang does not "
                                   f"run (SGLang's share is --mem-fraction-static); drop "
                                   f"--{vllm[0].replace('_', '-')}")
    if a.block_size is not None and a.block_size not in VLLM_BLOCK_SIZES:
        raise LedgerError("block_size", f"--block-size {a.block_size}: vLLM takes one of "
                                        f"{', '.join(map(str, VLLM_BLOCK_SIZES))} (its "
                                        f"CacheConfig's BlockSize, vllm/config/cache.py L22 "
                                        f"at c1d86421)")
    return ServeConfig(quant=quant, mxfp4_backend=a.mxfp4_backend, engine=a.engine,
                       sampler=a.sampler or "flashinfer",
                       mem_fraction_static=a.mem_fraction_static,
                       chunked_prefill_size=a.chunked_prefill_size, tp=a.tp, pp=a.pp,
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


def _check_context(a: argparse.Namespace) -> None:
    """--context within the engine's length: a config.json's as the engine derives it, a
    preset's from its published config.json where the preset names one release."""
    from ledger.io.hf.max_len import check_context, refuse_context
    from ledger.model import PRESETS
    from ledger.serve.checkpoints import PUBLISHED_MAX_LEN

    if a.launch is not None or a.model is None or a.model == "custom":
        return
    name = a.model.lower()
    if name in PRESETS:
        refuse_context(a.context, PUBLISHED_MAX_LEN.get(name), a.engine,
                       f"{name}'s published config.json")
    else:
        check_context(a.context, a.model, a.engine)


def kv_auto(quant, engine: str) -> tuple[str, str | None]:
    """--kv-cache-dtype auto, as the engine resolves it, and the line naming a checkpoint's
    KV cache the engine does not take (None when it takes it).

    vLLM takes the KV cache a ModelOpt checkpoint declares (``Quant.kv_cache``: its
    kv_cache_quant_algo / kv_cache_scheme, FP8 to fp8_e4m3 and NVFP4 to nvfp4,
    MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP and get_kv_cache_quant_algo_string in
    vllm/utils/torch_utils.py at 0024350b), else the model's bf16. SGLang's auto takes the
    quant config's kv_cache_quant_algo only when it is FP8 (fp8_e4m3), else the model's
    dtype (configure_kv_cache_dtype, python/sglang/srt/mem_cache/kv_cache_dtype.py L39-49
    at 10a75eae): an NVFP4 KV cache is served in bf16 there, though SGLang runs one when
    --kv-cache-dtype nvfp4 asks (L77-79)."""
    kv = getattr(quant, "kv_cache", None)
    if engine == "vllm" or kv != "nvfp4":
        return kv or "bf16", None
    return "bf16", (f"the checkpoint's NVFP4 KV cache ({quant.source}): SGLang's "
                    f"--kv-cache-dtype auto takes only FP8 from it (kv_cache_dtype.py L39-49 "
                    f"at 10a75eae), priced as its fallback, the model's bf16; "
                    f"--kv-cache-dtype nvfp4 runs it")


# what vLLM's profile-based budget reads, none of which sizes a given --kv-cache-memory-bytes
PROFILED = ("gpu_memory_utilization", "non_torch_gib", "cudagraph_gib", "sampler")
# the block sizes vLLM's --block-size accepts: its CacheConfig's BlockSize Literal
# (vllm/config/cache.py L22 at c1d86421), which vllm/engine/arg_utils.py's
# literal_to_kwargs turns into the flag's argparse choices; which of these each attention
# backend's kernels then take is not checked here
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
# serve flags only vLLM's memory plan reads (the pool, its profile run, its CUDA graphs)
VLLM_ONLY = ("gpu_memory_utilization", "kv_cache_memory_bytes", "block_size", "max_num_seqs",
             "sampler", "non_torch_gib", "cudagraph_gib", "enforce_eager")
