"""Seconds: a decode step from the memory-bandwidth roofline, a prefill from compute.

Decode (the scaling book, jax-ml/scaling-book inference.md at 0819a7d8c5, lines 206-220:
"Theoretical Min Step Time = (Batch Size x KV Cache Size + Parameter Size) / Total Memory
Bandwidth", and with the MLP's compute roofline)

    t_stage = B x KV bytes / HBM bandwidth + max(2 B P / FLOP/s, weight bytes read / HBM bandwidth)

per pipeline stage, on one GPU: KV the stage's cache of one sequence at the context, P its
parameters a token multiplies, the weights read those of the dense part and of the experts
the step's tokens reach. A token passes the stages in turn, and each stage's TP, EP and
PP collectives sit on its path (``call_s``). Prefill: the forward FLOPs of one prompt
(``ledger.arch``: 2 N_matmul per token, the causal attention core, the output head for
the last token only) over tp GPUs at the GPU's sustained GEMM share (the time model's
declared ``gemm_efficiency``, ``ledger.system``), or the weights read once per scheduled
chunk, whichever is longer, plus its collectives; the chunk is the engine's
(``ledger.serve.estimate.prefill_chunk``: vLLM's max_num_batched_tokens, SGLang's
chunked_prefill_size).
"""
from __future__ import annotations

from ledger.arch import (attention_flops_per_token, matmul_params_per_token,
                         recurrent_flops_per_token)
from ledger.serve.engine import WEIGHT_BYTES
from ledger.serve.paging import cdiv


def allreduce_hops(n: int, message_bytes: float, link: str) -> int:
    """Latency hops of one all-reduce of ``message_bytes``. Inside a node vLLM's custom
    all-reduce runs one-shot for 2 GPUs, and for up to 4 (8) GPUs below 512 (256) KiB
    (csrc/custom_all_reduce.cuh:588-597; world sizes 2, 4, 6, 8,
    vllm/distributed/device_communicators/custom_all_reduce.py:51): one hop. Otherwise a
    ring: a reduce-scatter and an all-gather of n - 1 hops each."""
    if link == "nvlink" and n in (2, 4, 6, 8):
        if n == 2 or (n <= 4 and message_bytes < 512 * 1024) \
                or (n <= 8 and message_bytes < 256 * 1024):
            return 1
    return 2 * (n - 1)


def call_s(row, system, tokens: float, sampled: float) -> float:
    """Seconds of one row's collectives in one forward pass over ``tokens`` tokens of
    which ``sampled`` are sampled: each call its latency hops and the row's bytes at
    the link's achieved bandwidth (``ledger.system``)."""
    count = sampled if row.per_sampled_token else tokens
    nbytes = row.bytes_per_token * count
    if row.kind == "all_reduce":
        hops = allreduce_hops(row.group, nbytes / row.calls, row.link)
    elif row.kind == "send_recv":
        hops = 1
    else:  # a ring all-gather or reduce-scatter (NCCL)
        hops = row.group - 1
    return row.calls * hops * system.latency(row.link) + nbytes / system.bandwidth(row.link)


def experts_reached(model, routed_tokens: float) -> float:
    """Share of a layer's experts that ``routed_tokens`` tokens reach, each choosing top_k
    of E uniformly: 1 - (1 - 1/E)^(tokens x top_k), the expected share of E bins that
    tokens x top_k draws hit (the occupancy expectation; routing is even here, as in
    ``ledger.config.MoESpec``)."""
    if not model.is_moe:
        return 1.0
    return 1 - (1 - 1 / model.num_experts) ** (routed_tokens * model.top_k)


def gemm_peak(gpu, quant) -> float:
    """FLOP/s the quantized GEMMs run at: W8A8 (fp8 or int8 activations) on the GPU's
    FP8 / INT8 tensor cores (the same dense peak on Hopper and Blackwell; vLLM's
    Fp8LinearMethod / CUTLASS scaled_mm), NVFP4 W4A4 at the FP8 peak (its FP4 peak is
    not in ``ledger.system``: an upper bound on the time); weight-only formats (W4A16,
    W8A16, NF4, MXFP4 on Hopper) dequantize to bf16 and run bf16 GEMMs (Marlin, the
    AWQ / GPTQ kernels, bitsandbytes). Without FP8 tensor cores (A100) vLLM runs FP8
    checkpoints weight-only (Marlin W8A16): bf16."""
    if quant is None or quant.activations == "bf16" or not gpu.fp8_flops:
        return gpu.bf16_flops
    return gpu.fp8_flops


def decode_stage_s(model, cfg, gpu, params: tuple[float, float], kv_bytes: float,
                   read: tuple[float, float] | None = None) -> float:
    """One decode step of ``cfg.batch`` sequences on one GPU of one stage: its cache
    (``kv_bytes`` per sequence) read once, and its weights either read (the dense ones,
    the experts the step reaches: ``read``, their bytes as stored, bf16 by default) or
    multiplied (2 FLOPs per parameter per token; a GPU's experts see dp x batch tokens
    and top_k / E of them each), whichever takes longer."""
    dense, expert = params
    dense_b, expert_b = read if read is not None else (dense * WEIGHT_BYTES,
                                                       expert * WEIGHT_BYTES)
    b, bw = cfg.batch, gpu.hbm_bytes_per_s
    share = model.top_k / model.num_experts if model.is_moe else 1.0
    flops = 2 * b * (dense + expert * cfg.dp * share)
    weights = dense_b + expert_b * experts_reached(model, b * cfg.dp)
    return b * kv_bytes / bw + max(flops / (gemm_peak(gpu, cfg.quant) * gpu.gemm_efficiency),
                                   weights / bw)


def prefill_flops(model, context: int) -> float:
    """Forward FLOPs of one prompt of ``context`` tokens: 2 N_matmul per token without the
    output head, the causal attention core and the recurrent mixers' cores (a third of
    ``attention_flops_per_token`` and ``recurrent_flops_per_token``, which count forward
    and backward), and the output head for the last token, the one vLLM samples (logits
    at the last token of each request, gpu_model_runner.py:5864-5868)."""
    head = model.vocab * model.hidden
    body = 2 * (matmul_params_per_token(model) - head)
    at = model.with_seq(context)
    cores = (attention_flops_per_token(at) + recurrent_flops_per_token(at)) / 3
    return context * (body + cores) + 2 * head


def prefill_compute_s(model, cfg, gpu, context: int, weight_bytes: float, chunk: int,
                      quantized_params: float = 0.0) -> float:
    """One prompt's forward on one replica: its FLOPs over tp GPUs (a pipeline's stages
    run it in turn; the experts' share over tp x dp GPUs that gather dp prompts' tokens
    comes to the same), the 2 x ``quantized_params`` a token multiplies in quantized
    matrices at their GEMMs' peak (``gemm_peak``), the rest at bf16; or the
    ``weight_bytes`` of all stages read once per chunk of ``chunk`` tokens (chunked
    prefill), whichever is longer."""
    total = prefill_flops(model, context)
    fast = min(total, 2 * context * quantized_params)
    rate = gpu.gemm_efficiency * cfg.tp
    compute = (total - fast) / (gpu.bf16_flops * rate) + fast / (gemm_peak(gpu, cfg.quant)
                                                                 * rate)
    return max(compute, cdiv(context, chunk) * weight_bytes / gpu.hbm_bytes_per_s)
