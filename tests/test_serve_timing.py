"""Serving's communication and time: the TP all-reduces, PP sends and EP gathers per token,
the all-reduce's latency hops, decode and prefill by hand, and decode against vLLM's
published blog figure."""
import pytest

from ledger.io import spec_from_dict
from ledger.model import deepseek_v3, llama3_8b, llama3_70b, qwen3_30b_a3b
from ledger.serve import ServeConfig, serve
from ledger.serve.timing import allreduce_hops, prefill_flops
from ledger.system import system
from test_serve import GPT_OSS_20B, H100


# ---- communication and time ----------------------------------------------------------
def test_tp_all_reduces_per_token_llama3_70b():
    """80 layers x 2 + the embedding's = 161 all-reduces of 8,192 x 2 B, each 2 x 7/8 of it
    sent per GPU: 4,616,192 B a token; the logits' 128,256 / 8 x 2 B to TP rank 0."""
    est = serve(llama3_70b(), ServeConfig(tp=8, context=8192), H100)
    rows = {(r.axis, r.kind): r for r in est.stages[0].comms}
    ar = rows["tp", "all_reduce"]
    assert (ar.calls, ar.bytes_per_token, ar.link) == (161, 161 * 2 * 7 / 8 * 16384, "nvlink")
    assert rows["tp", "send_recv"].bytes_per_token == 128256 / 8 * 2


def test_pp_sends_a_tp_share_of_hidden_and_residual():
    est = serve(deepseek_v3(), ServeConfig(tp=8, pp=2, context=4096), system("h200"))
    first = {(r.axis, r.kind): r for r in est.stages[0].comms}
    last = {(r.axis, r.kind): r for r in est.stages[1].comms}
    assert first["pp", "send_recv"].bytes_per_token == 2 * 7168 * 2 / 8
    assert first["pp", "send_recv"].link == "ib"  # 16 GPUs: the stages are two nodes
    assert last["pp", "all_gather"].bytes_per_token == 7 / 8 * 2 * 7168 * 2


def test_ep_gathers_every_dp_rank_tokens():
    """Qwen3-30B-A3B at tp 2, dp 4, EP 8: per MoE layer and token, an all-gather over the 8
    GPUs of 4 ranks' h + E values (7/8 x 4 x (2,048 + 128) x 2 B) and a reduce-scatter of
    their h outputs (7/8 x 4 x 2,048 x 2 B); a dense model at dp > 1 sends nothing."""
    est = serve(qwen3_30b_a3b(), ServeConfig(tp=2, dp=4, ep=8, context=4096), H100)
    rows = {(r.axis, r.kind): r for r in est.stages[0].comms}
    assert rows["ep", "all_gather"].bytes_per_token == 48 * 7 / 8 * 4 * 2176 * 2
    assert rows["ep", "reduce_scatter"].bytes_per_token == 48 * 7 / 8 * 4 * 2048 * 2
    dense = serve(llama3_8b(), ServeConfig(dp=4, context=4096), H100)
    assert dense.stages[0].comms == ()


def test_all_reduce_latency_hops():
    assert allreduce_hops(8, 16 * 1024, "nvlink") == 1  # custom all-reduce, one-shot
    assert allreduce_hops(8, 1 << 20, "nvlink") == 14  # NCCL ring
    assert allreduce_hops(4, 300 * 1024, "nvlink") == 1
    assert allreduce_hops(2, 1 << 30, "nvlink") == 1
    assert allreduce_hops(16, 1024, "ib") == 30


def test_decode_roofline_by_hand():
    """Llama-3-8B on one H100, one sequence: its weights less the embedding table (a step
    reads its tokens' rows) and its cache of 131,072 B a token, at 3.35 TB/s."""
    m = llama3_8b()
    for context in (1024, 8192):
        est = serve(m, ServeConfig(context=context), H100)
        read = (m.params - m.breakdown["embedding"]) * 2 + 131_072 * context
        assert est.decode_s_per_token == pytest.approx(read / 3.35e12, rel=1e-12)


def test_prefill_flops_by_hand():
    """Llama-3-8B, 8,192 tokens: per layer q/o 4,096^2 x 2, k/v 4,096 x 1,024 x 2, MLP
    3 x 4,096 x 14,336 = 218,103,808 weights, x 32 layers; attention 2 x 4,096 keys x 32
    heads x (128 + 128) x 32 layers per token; the 128,256 x 4,096 head for the last token."""
    per_token = 2 * 32 * 218_103_808 + 2 * 4096 * 32 * 256 * 32
    assert prefill_flops(llama3_8b(), 8192) == 8192 * per_token + 2 * 128256 * 4096


def test_decode_against_the_vllm_blog():
    """vLLM blog, "The State of FP8 KV-Cache and Attention Quantization in vLLM"
    (vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md:106, :116 at c3a01c4a58): one
    H100, concurrency 1, ITL = slope x input length + intercept. Llama-3.1-8B BF16: 4.37e-05
    ms a token, 6.44 ms; gpt-oss-20b BF16: 8.94e-06 ms a token. A roofline is a lower bound,
    "often a reasonable bound (within 1.5x)" (scaling book applied-inference.md:189)."""
    def itl(model, context):
        return serve(model, ServeConfig(context=context), H100).decode_s_per_token * 1e3

    m = llama3_8b()
    slope = (itl(m, 65536) - itl(m, 1024)) / (65536 - 1024)
    intercept = itl(m, 1024) - 1024 * slope
    assert 1 <= 4.37e-05 / slope <= 1.5 and 1 <= 6.44 / intercept <= 1.5
    oss = spec_from_dict(GPT_OSS_20B)
    slope = (itl(oss, 65536) - itl(oss, 1024)) / (65536 - 1024)
    assert 1 <= 8.94e-06 / slope <= 1.5
