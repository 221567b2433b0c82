"""SGLang's memory plan (``--engine sglang``, issue 33): its default static fraction worked
by hand from server_args.py's reserve, its token pool from the kv-cache mixin's formula,
and DeepSeek-R1's pool held to a published observation."""
from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.model import llama3_8b
from ledger.serve import ServeConfig, serve
from ledger.serve.sglang import piecewise_sizes, reserved_mb
from ledger.system import system

HERE = Path(__file__).parent / "fixtures" / "serve"


def test_default_fraction_by_hand():
    """H100 (81,559 MB), tp 1, no MLA: 512 + 8,192 x 1.5 + 256 x 2 + 1/8 x 1,024 + 58
    piecewise sizes x 8 = 13,904 MB; H200 (143,771 MB), tp 8, MLA: 512 + 12,288 + 1,024 +
    1,024 + 1,536 = 16,384 MB."""
    assert piecewise_sizes(8192) == 8 + 14 + 8 + 8 + 12 + 8
    assert reserved_mb(81559, 1, 1, False, 8192, 256) == 13904
    assert reserved_mb(143771, 8, 1, True, 8192, 512) == 16384
    est = serve(llama3_8b(), ServeConfig(context=8192, engine="sglang"), system("h100-sxm"))
    assert est.sglang[0].mem_fraction_static == round((81559 - 13904) / 81559, 3)


CUDA_TOTAL_H100 = 79.18 * 2**30  # torch.cuda.mem_get_info's total on an H100 80 GB
# (vLLM's start-up logs in llm-d-benchmark; PyTorch's "total capacity of 79.18 GiB")


def test_token_pool_by_hand():
    """rest = total x fraction - weights; tokens = rest // cell, a cell Llama-3-8B's 32
    layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B. The total is what CUDA reports
    free before the weights (model_runner's min_per_gpu_memory, read by
    torch.cuda.mem_get_info), at most CUDA's total of 79.18 GiB - not nvidia-smi's
    81,559 MiB, which sets only the default fraction's tiers."""
    est = serve(llama3_8b(), ServeConfig(context=8192, engine="sglang",
                                        mem_fraction_static=0.8), system("h100-sxm"))
    p = est.sglang[0]
    weights = est.weight_bytes_per_gpu
    assert p.cell_bytes == 32 * 8 * 256 * 2
    assert p.max_total_num_tokens == int((CUDA_TOTAL_H100 * 0.8 - weights) // 131072)
    assert p.gpu_mem_mb == 81559
    assert est.max_sequences == p.max_total_num_tokens // 8192


def test_both_engines_start_from_cuda_s_total():
    """vLLM's requested memory and SGLang's token pool read the same CUDA figure on the
    H100 (review finding: SGLang's pool took nvidia-smi's 79.65 GiB, vLLM 79.18)."""
    h100 = system("h100-sxm")
    vllm = serve(llama3_8b(), ServeConfig(context=8192), h100)
    sgl = serve(llama3_8b(), ServeConfig(context=8192, engine="sglang",
                                         mem_fraction_static=1.0), h100)
    assert vllm.stages[0].budget.hbm_bytes == CUDA_TOTAL_H100
    assert sgl.sglang[0].pool_bytes == pytest.approx(CUDA_TOTAL_H100
                                                     - sgl.weight_bytes_per_gpu)


def test_deepseek_r1_pool_against_an_observation():
    """DeepSeek-R1 FP8 on 8 H200, SGLang at --mem-fraction-static 0.82 with a bf16 MLA
    cache: ~509k tokens observed (ai-dynamo/aisimulate PR #263's replay). The ledger finds
    547,570 (+7.6%): it counts the GPU's whole memory free after the weights, where CUDA
    context, NCCL and the loader hold some 2.5 GiB."""
    model, _ = read_hf_config(HERE / "deepseek-v3-fp8.json")
    q = read_hf_quant(HERE / "deepseek-v3-fp8.json")
    est = serve(model, ServeConfig(tp=8, context=32768, quant=q, engine="sglang",
                                   mem_fraction_static=0.82), system("h200"))
    assert est.sglang[0].max_total_num_tokens == pytest.approx(509_000, rel=0.10)
    assert est.starts


def test_refusals():
    with pytest.raises(LedgerError, match="dp"):
        ServeConfig(context=8192, dp=2, engine="sglang")
    model, _ = read_hf_config(HERE / "gpt-oss-120b.json")
    with pytest.raises(LedgerError, match="SWAKVPool"):
        serve(model, ServeConfig(context=8192, engine="sglang"), system("h100-sxm"))


def test_each_cuda_total_has_its_source():
    from ledger.system.chips import CUDA_TOTAL_BYTES, GPUS
    from ledger.system.sources import CUDA_TOTAL_SOURCES

    assert set(CUDA_TOTAL_BYTES) == set(CUDA_TOTAL_SOURCES) and set(CUDA_TOTAL_BYTES) <= set(GPUS)
    assert all(CUDA_TOTAL_BYTES[n] < GPUS[n].hbm_bytes for n in CUDA_TOTAL_BYTES)


def test_json_headline_is_sglang_s_pool(capsys):
    """serve --engine sglang --json: max_concurrency and gpu_kv_cache_tokens are SGLang's
    token pool, the figures its text prints (review: they were the vLLM pool's, 450,976
    tokens / 55.05 where SGLang holds 415,841 / 50.76, and moved with vLLM-only flags)."""
    import json

    from ledger.cli import main

    assert main(["serve", "llama3-8b", "--context", "8192", "--engine", "sglang",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    tokens = d["sglang"][0]["max_total_num_tokens"]
    assert d["gpu_kv_cache_tokens"] == tokens
    assert d["max_concurrency"] == tokens / 8192
    assert d["max_sequences"] == tokens // 8192


@pytest.mark.parametrize("flag", [["--sampler", "sort"], ["--non-torch-gib", "1"],
                                  ["--cudagraph-gib", "1"], ["--enforce-eager"],
                                  ["--gpu-memory-utilization", "0.5"],
                                  ["--kv-cache-memory-bytes", "4000000000"],
                                  ["--block-size", "32"], ["--max-num-seqs", "8"]])
def test_vllm_flags_refused_beside_sglang(capsys, flag):
    """vLLM's memory-plan flags change nothing SGLang's plan reads: beside --engine sglang
    they are refused in one line naming the flag (as --mem-fraction-static is without
    it), not accepted and dropped; without it they still run."""
    from ledger.cli import main

    argv = ["serve", "llama3-8b", "--context", "8192", *flag]
    assert main([*argv, "--engine", "sglang"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and f"drop {flag[0]}" in err
    assert main(argv) == 0, capsys.readouterr().err
