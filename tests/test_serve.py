"""Serving: KV bytes, vLLM's pages and concurrency, weights, budget, comms and time.

Expected values are hand arithmetic from the published shapes, vLLM's own formula worked
by hand on its inputs (vllm-project/vllm at 9aaf83ef50, the lines cited in ledger.serve),
and figures vLLM's developers published: start-up logs (weights, concurrency) and the
decode latencies of the vLLM blog. The KV bytes against transformers' caches are
tests/test_serve_hf.py.
"""
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli import main
from ledger.io import spec_from_dict
from ledger.model import (PRESETS, ModelSpec, deepseek_v3, llama3_8b, llama3_70b, llama3_405b,
                          qwen3_30b_a3b)
from ledger.serve import Engine, ServeConfig, engine, layer_caches, pipeline_split, serve
from ledger.serve.budget import (
    cuda_total_bytes,
    profile_activation_bytes,
    requested_bytes,
    topk_topp_buffer_bytes,
)
from ledger.serve.paging import pool
from ledger.serve.weights import weight_bytes_by_rank
from ledger.system import GPUS, system

GiB = 2**30
H100 = system("h100-sxm")

# the published config.json of two models with local layers (as in tests/test_hf_counts.py)
GEMMA3_27B = {"model_type": "gemma3_text", "vocab_size": 262208, "hidden_size": 5376,
              "intermediate_size": 21504, "num_hidden_layers": 62, "num_attention_heads": 32,
              "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024,
              "sliding_window_pattern": 6, "max_position_embeddings": 131072}
SCOUT = {"model_type": "llama4_text", "vocab_size": 202048, "hidden_size": 5120,
         "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
         "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
         "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
         "attention_chunk_size": 8192, "use_qk_norm": True, "max_position_embeddings": 10485760}
GPT_OSS_20B = {"model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
               "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
               "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
               "num_experts_per_tok": 4, "sliding_window": 128,
               "max_position_embeddings": 131072}


def one_worker_pool(model, tp, available, context, block=16, batched=8192, hybrid=True,
                    kv_bytes=2):
    caches = layer_caches(model, range(model.layers), tp, kv_bytes)
    return pool(caches, [list(range(model.layers))], [available], context,
                Engine(block, batched, 1024, hybrid, kv_bytes))


# ---- KV bytes per token, by hand -------------------------------------------------
def test_gqa_bytes_per_token_split_by_tp_and_replicated_past_the_kv_heads():
    per_tp = {1: 80 * 2 * 8 * 128 * 2, 8: 80 * 2 * 1 * 128 * 2}  # 327,680 and 40,960
    for tp, expected in per_tp.items():
        assert sum(c.bytes_per_token for c in layer_caches(llama3_70b(), range(80), tp, 2)) \
            == expected
    # 405B has 8 KV heads: at tp 16 each GPU keeps one whole head, as at tp 8
    at16 = layer_caches(llama3_405b(), range(126), 16, 2)
    assert sum(c.bytes_per_token for c in at16) == 126 * 2 * 1 * 128 * 2 == 64_512


def test_mla_caches_its_latent_whole_on_every_tp_rank():
    for tp in (1, 8, 16):
        caches = layer_caches(deepseek_v3(), range(61), tp, 2)
        assert sum(c.bytes_per_token for c in caches) == 61 * (512 + 64) * 2 == 70_272


def test_fp8_halves_the_cache():
    assert sum(c.bytes_per_token for c in layer_caches(llama3_70b(), range(80), 8, 1)) == 20_480


def test_windows_keep_window_minus_one_tokens():
    """Mistral-like: every layer slides over 4,096 keys; at 8,192 tokens each keeps 4,095;
    Gemma 3 27B: 52 of 62 layers slide over 1,024."""
    m = ModelSpec(name="w", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                  vocab=32000, seq_len=8192, sliding_window=4096)
    caches = layer_caches(m, range(4), 1, 2)
    assert [c.bytes_at(8192) for c in caches] == [4095 * 2 * 8 * 128 * 2] * 4
    assert [c.bytes_at(100) for c in caches] == [100 * 4096] * 4
    g = spec_from_dict(GEMMA3_27B)
    kinds = [c.kind for c in layer_caches(g, range(62), 1, 2)]
    assert kinds.count("sliding") == 52 and kinds.count("full") == 10
    per_token = 2 * 16 * 128 * 2
    assert sum(c.bytes_at(32768) for c in layer_caches(g, range(62), 1, 2)) \
        == 10 * 32768 * per_token + 52 * 1023 * per_token


def test_chunked_layers_of_llama4():
    s = spec_from_dict(SCOUT)
    kinds = [c.kind for c in layer_caches(s, range(48), 1, 2)]
    assert kinds.count("chunked") == 36 and kinds.count("full") == 12
    assert layer_caches(s, [0], 1, 2)[0].kept_tokens(131072) == 8191


# ---- vLLM's pages, groups, blocks and concurrency, on its own inputs -------------
def test_full_attention_pool_llama3_70b():
    """Page 16 x 512 B = 8,192 B; 50 GiB // 8,192 // 80 = 81,920 blocks; a request of
    8,192 tokens takes 512; 81,920 / 512 = 160.00x, int(160 x 8,192) = 1,310,720 tokens."""
    p = one_worker_pool(llama3_70b(), 8, 50 * GiB, 8192)
    assert (p.page_bytes, p.groups, p.group_size) == (8192, 1, 80)
    assert (p.num_blocks, p.blocks_per_request) == (81_920, 512)
    assert (p.max_concurrency, p.kv_tokens) == (160.0, 1_310_720)


def test_mla_pool_deepseek_v3_with_flashmla_blocks():
    """Block 64 (FlashMLA): page 64 x 576 x 2 = 73,728 B; 40 GiB // 73,728 = 582,542;
    // 61 = 9,549 blocks; 32,768 / 64 = 512 a request: 18.65x."""
    p = one_worker_pool(deepseek_v3(), 8, 40 * GiB, 32768, block=64)
    assert (p.page_bytes, p.num_blocks, p.blocks_per_request) == (73_728, 9_549, 512)
    assert f"{p.max_concurrency:.2f}" == "18.65"


def test_hybrid_groups_gemma3():
    """10 full + 52 sliding layers: groups of 10 (52 >= 1.5 x 10), 1 full + 6 sliding;
    40 GiB // 131,072 B // 10 = 32,768 blocks. A request of 32,768 tokens: 2,048 full
    blocks + 6 x (cdiv(min(1023 + 8192, 32768), 16) + 1) = 6 x 577: 5,510; 5.95x. With
    the hybrid manager off every layer is full: 40 GiB // 131,072 // 62 = 5,285 / 2,048
    = 2.58x."""
    g = spec_from_dict(GEMMA3_27B)
    on = one_worker_pool(g, 1, 40 * GiB, 32768)
    assert (on.groups, on.group_size, on.num_blocks, on.blocks_per_request) \
        == (7, 10, 32_768, 2048 + 6 * 577)
    assert f"{on.max_concurrency:.2f}" == "5.95"
    off = one_worker_pool(g, 1, 40 * GiB, 32768, hybrid=False)
    assert (off.groups, off.num_blocks, off.blocks_per_request) == (1, 5_285, 2048)
    assert f"{off.max_concurrency:.2f}" == "2.58"


def test_chunked_attention_is_cached_in_full_by_default():
    """vLLM turns the hybrid manager off for chunked local attention: 48 full layers,
    page 16 x 4,096 B = 65,536; 40 GiB // 65,536 // 48 = 13,653 / 8,192 = 1.67x. On, groups
    of 12: 8,192 + 3 x cdiv(min(8192 + 8192, 131072), 16) = 8,192 + 3 x 1,024 blocks;
    40 GiB // 65,536 // 12 = 54,613 -> 4.85x."""
    s = spec_from_dict(SCOUT)
    assert engine(s, ServeConfig(context=131072), GPUS["h100-sxm"]).hybrid_manager is False
    off = one_worker_pool(s, 1, 40 * GiB, 131072, hybrid=False)
    assert (off.num_blocks, off.blocks_per_request) == (13_653, 8192)
    assert f"{off.max_concurrency:.2f}" == "1.67"
    on = one_worker_pool(s, 1, 40 * GiB, 131072)
    assert (on.groups, on.num_blocks, on.blocks_per_request) == (4, 54_613, 8192 + 3 * 1024)
    assert f"{on.max_concurrency:.2f}" == "4.85"


def test_concurrency_of_a_published_vllm_log():
    """vllm-project/vllm PR #12569 (its description): Llama-3.1-70B on one GPU, max-model-len
    2,048: "# GPU blocks: 1381", "Maximum concurrency for 2048 tokens per request: 10.79x"."""
    m = llama3_70b()
    page = 16 * 2 * 8 * 128 * 2
    p = one_worker_pool(m, 1, 1381 * page * 80, 2048)
    assert p.num_blocks == 1381 and f"{p.max_concurrency:.2f}" == "10.79"


def test_pipeline_workers_keep_the_fewest_blocks():
    """DeepSeek-V3 over 2 stages splits 61 layers 31 + 30 (vLLM gives the remainder to the
    stages before the last); with the same memory each, the 31-layer worker binds."""
    assert pipeline_split(61, 2) == [31, 30]
    m = deepseek_v3()
    caches = layer_caches(m, range(61), 8, 2)
    eng = Engine(16, 8192, 1024, True, 2)
    p = pool(caches, [list(range(31)), list(range(31, 61))], [10 * GiB] * 2, 4096, eng)
    page = 16 * 1152
    assert p.worker_blocks == (10 * GiB // page // 31, 10 * GiB // page // 30)
    assert p.num_blocks == 10 * GiB // page // 31 and p.binding_worker == 0


def test_too_little_memory_is_a_refusal():
    p = one_worker_pool(llama3_70b(), 8, 100 * 2**20, 8192)  # 100 MiB < 320 MiB a request
    assert p.short == (80 * 8192 * 512, 100 * 2**20)
    assert one_worker_pool(llama3_70b(), 8, -1.0, 8192).short[1] == -1.0


# ---- weights, budget ---------------------------------------------------------------
def test_weights_per_gpu_as_vllm_logged_them():
    """vllm-project/vllm PR #10511 (a comment by its author): Meta-Llama-3-8B on H100,
    "model weights take 14.96GiB", and at -tp 2 "7.48GiB"."""
    m = llama3_8b()
    assert f"{weight_bytes_by_rank(m, ServeConfig(context=8192))[0] / GiB:.2f}" == "14.96"
    assert f"{weight_bytes_by_rank(m, ServeConfig(tp=2, context=8192))[0] / GiB:.2f}" == "7.48"


def test_kv_heads_replicated_in_the_weights():
    """405B at tp 16: each GPU holds one whole K/V head (8 heads / 16 GPUs would be half):
    per layer (1 - 8/16) x 16,384 x (128 + 128) more parameters."""
    m = llama3_405b()
    at16 = weight_bytes_by_rank(m, ServeConfig(tp=16, context=8192))[0]
    even = (m.params - m.breakdown["norms"]) / 16 + m.breakdown["norms"]
    assert at16 - even * 2 == pytest.approx(126 * 0.5 * 16384 * 256 * 2, abs=1)


def test_experts_span_tp_times_dp_with_or_without_ep():
    m = qwen3_30b_a3b()
    with_ep = weight_bytes_by_rank(m, ServeConfig(tp=2, dp=4, ep=8, context=4096))[0]
    without = weight_bytes_by_rank(m, ServeConfig(tp=2, dp=4, context=4096))[0]
    assert with_ep == without
    tp2 = weight_bytes_by_rank(m, ServeConfig(tp=2, context=4096))[0]
    assert tp2 - with_ep == pytest.approx(m.breakdown["experts"] * 2 * (1 / 2 - 1 / 8))


def test_budget_by_hand_llama3_8b():
    """ceil(81,559 MiB x 0.92); the profile run at 8,192 tokens: the forward's hidden and
    residual (2 x 8,192 x 4,096) plus its widest MLP (3 x 14,336 x 8,192) in bf16 =
    838,860,800 B; the sampler pass: the forward's output (8,192 x 4,096 x 2 B), the
    1,024 gathered last tokens and their random copy (2 x 1,024 x 4,096 x 2 B), 1,024 rows
    of 128,256 logits with FlashInfer's top-k / top-p then the Triton pass vLLM warms
    after it: bf16, their fp32 copy and two fp32 rows more (2 + 4 + 4 + 4 B), and the
    Triton kernel's buffer of 132 rows (one per H100 SM) of the vocabulary in fp32:
    67,108,864 + 16,777,216 + 1,024 x 128,256 x 14 + 132 x 128,256 x 4 = 1,990,283,264 B,
    the larger. vLLM asks ceil(total x utilization) of the total CUDA reports: 79.18 GiB on
    an H100."""
    assert requested_bytes(81559 * 2**20, 0.92) == math.ceil(81559 * 2**20 * 0.92)
    assert cuda_total_bytes(GPUS["h100-sxm"]) == 79.18 * 2**30
    assert cuda_total_bytes(GPUS["h200"]) == GPUS["h200"].hbm_bytes
    m, cfg = llama3_8b(), ServeConfig(context=8192)
    eng = engine(m, cfg, GPUS["h100-sxm"])
    assert (eng.max_num_batched_tokens, eng.max_num_seqs) == (8192, 1024)
    sampler = 67_108_864 + 16_777_216 + 1024 * 128256 * 14 + 132 * 128256 * 4
    assert sampler == 1_990_283_264
    sms = GPUS["h100-sxm"].sms
    assert sms == 132
    assert profile_activation_bytes(m, cfg, eng, range(32), True, sms) == sampler
    assert profile_activation_bytes(m, cfg, eng, range(32), False, sms) == 838_860_800


def test_triton_top_k_buffer_one_row_per_program():
    """The Triton top-k / top-p buffer: min(next power of two of min(SMs, rows), SMs) rows
    of the vocabulary in fp32 - 132 on an H100 at 1,024 rows, 64 at 40 rows, none below 8
    rows (the PyTorch sort runs there) nor with the older sort."""
    assert topk_topp_buffer_bytes(1024, 1000, 132, "flashinfer") == 132 * 1000 * 4
    assert topk_topp_buffer_bytes(40, 1000, 132, "native") == 64 * 1000 * 4
    assert topk_topp_buffer_bytes(4, 1000, 132, "native") == 0
    assert topk_topp_buffer_bytes(1024, 1000, 132, "sort") == 0


def test_engine_defaults_follow_the_gpu_and_the_context():
    """8,192 / 1,024 on 80 GB H100s, 2,048 / 256 on A100s; unset, the batched tokens are
    capped at max_num_seqs x max_model_len."""
    m = llama3_8b()
    a100 = engine(m, ServeConfig(context=4096), GPUS["a100-80gb"])
    assert (a100.max_num_batched_tokens, a100.max_num_seqs, a100.block_size) == (2048, 256, 16)
    tiny = engine(m, ServeConfig(context=4, max_num_seqs=2), GPUS["h100-sxm"])
    assert (tiny.max_num_batched_tokens, tiny.max_num_seqs) == (8, 2)


# ---- the command -------------------------------------------------------------------
def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_serve_json_carries_the_figures(capsys):
    code, out, _ = run(capsys, "serve", "llama3-70b", "--tp", "8", "--context", "8192",
                       "--gpu", "h100-sxm", "--json")
    d = json.loads(out)
    est = serve(llama3_70b(), ServeConfig(tp=8, context=8192), H100)
    assert code == 0
    assert d["kv_bytes_per_token"] == 40_960 and d["kv_bytes_per_sequence"] == 40_960 * 8192
    assert d["weight_bytes_per_gpu"] == est.weight_bytes_per_gpu
    assert d["max_sequences"] == int(est.pool.max_concurrency) == est.max_sequences
    assert d["prefill_s"] == est.prefill_s and d["decode_s_per_token"] == est.decode_s_per_token
    assert d["vllm_commit"] == "9aaf83ef502fc37bc647f6e474314d48ba36cd1c"


def test_serve_reads_config_json_and_launch_files(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3_27B))
    code, out, _ = run(capsys, "serve", str(path), "--context", "32768", "--json")
    assert code == 0 and json.loads(out)["layers"][0]["kind"] == "sliding"
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "llama3_8b.sh"
    code, out, err = run(capsys, "serve", "--from-megatron", str(example), "--context", "8192",
                         "--json")
    assert code == 0 and err == "" and json.loads(out)["kv_bytes_per_token"] == 131_072


@pytest.mark.parametrize("argv,field", [
    (["llama3-70b", "--tp", "3", "--context", "8192"], "heads"),
    (["qwen3-30b-a3b", "--tp", "2", "--dp", "4", "--ep", "4", "--context", "8192"], "ep"),
    (["llama3-70b", "--ep", "2", "--context", "8192"], "ep"),
    (["llama3-70b", "--context", "0"], "context"),
    (["llama3-70b", "--context", "8192", "--gpu-memory-utilization", "1.5"],
     "gpu_memory_utilization"),
    (["llama3-70b", "--context", "8192", "--gpu-memory-utilization", "nan"],
     "gpu_memory_utilization"),
    (["llama3-70b", "--context", "8192", "--seq", "4096"], "seq"),
    (["llama3-70b", "--context", "8192", "--hybrid-kv-cache-manager", "on"],
     "hybrid_kv_cache_manager"),
    (["llama3-70b", "--context", "8192", "--kv-dtype", "int8"], "kv_dtype"),
    (["llama3-70b", "--pp", "81", "--context", "8192"], "pp"),
    (["llama3-70b", "--tp", "16", "--context", "8192", "--enable-expert-parallel"], "ep"),
    (["llama3-70b"], "usage"),
])
def test_bad_serving_input_is_one_line(capsys, argv, field):
    code, out, err = run(capsys, "serve", *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: {field}")


def test_a_layout_vllm_cannot_start_exits_1(capsys):
    code, out, _ = run(capsys, "serve", "llama3-405b", "--context", "8192")
    assert code == 1 and "0: vLLM would refuse to start (no memory is left" in out
    code, out, _ = run(capsys, "serve", "llama3-405b", "--context", "8192", "--json")
    assert code == 1 and json.loads(out)["max_sequences"] == 0


SIZES = st.sampled_from([1, 2, 3, 4, 8, 16, 64, 1 << 20])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(PRESETS)), tp=SIZES, pp=SIZES, dp=SIZES,
       ep=st.sampled_from(["1", "2", "all"]), context=st.integers(1, 1 << 24),
       batch=st.integers(1, 1 << 20), kv=st.sampled_from(["bf16", "fp8"]),
       util=st.sampled_from(["0.01", "0.5", "1"]))
def test_generated_layouts_give_finite_json_or_one_line(model, tp, pp, dp, ep, context, batch,
                                                        kv, util):
    import io
    from contextlib import redirect_stderr, redirect_stdout

    ep_flag = ["--enable-expert-parallel"] if ep == "all" else ["--ep", ep]
    argv = ["serve", model, "--tp", str(tp), "--pp", str(pp), "--dp", str(dp), *ep_flag,
            "--context", str(context), "--batch", str(batch), "--kv-dtype", kv,
            "--gpu-memory-utilization", util, "--json"]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    if code == 2:
        assert out.getvalue() == "" and len(err.getvalue().splitlines()) == 1
        return
    assert code in (0, 1) and err.getvalue() == ""
    d = json.loads(out.getvalue())  # json.dumps(allow_nan=False) refused NaN and Infinity
    assert d["starts"] == (code == 0) and d["max_sequences"] >= 0
    assert d["kv_bytes_per_sequence"] <= d["kv_bytes_per_token"] * context
