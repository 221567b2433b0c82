"""The prefill time chunks a prompt as the chosen engine does (ledger.serve.estimate.
prefill_chunk): vLLM by max_num_batched_tokens, SGLang by chunked_prefill_size, its GPU
tier's unless given, -1 keeping the prompt in one forward. The expected chunks are the
engines' own defaults, read at the cited commits, not the ledger's tables:

- vLLM: 8,192 tokens on GPUs of 70 GiB or more other than the A100, else 2,048
  (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py:2287-2306);
- SGLang (python/sglang/srt/server_args.py at 0a6356ae56187a7977bdbe6df3a9016b23ae32a1,
  _handle_gpu_memory_settings L1382-1467): 4,096 on 35-60 GB, 8,192 on 60-160 GB,
  16,384 above; -1 disables chunked prefill (the flag's help, L4560-4564; "keeps a
  request in a single forward", L3453-3454), the reserve then taking max_prefill_tokens'
  16,384 (L397, L1526-1529) and the piecewise graphs none (their max tokens the chunk,
  L1500, the capture list L1638-1652 empty at -1).

Before this, SGLang's prefill was chunked by vLLM's default whatever its flag said."""
import json
from pathlib import Path

import pytest

from test_launch_files import run

QWEN = str(Path(__file__).parent / "fixtures" / "hf" / "released" / "qwen2.5-7b.json")
CONTEXT = 32768
H100_HBM_BYTES_PER_S = 3.35e12  # NVIDIA H100 SXM datasheet, 3.35 TB/s


def serve(*argv):
    code, out, err = run("serve", QWEN, "--context", str(CONTEXT), *argv)
    assert code == 0, err
    return out


def serve_json(*argv):
    return json.loads(serve(*argv, "--json"))


def test_a_small_sglang_chunk_takes_more_chunks_and_longer():
    """32,768 tokens on one H100: SGLang's tier chunks by 8,192 (4 chunks, compute-bound);
    --chunked-prefill-size 64 takes 512 chunks, each reading the weights once, so the
    prefill is 512 x the weights / 3.35 TB/s, longer than the default's."""
    default = serve_json("--engine", "sglang")
    small = serve_json("--engine", "sglang", "--chunked-prefill-size", "64")
    read_s = CONTEXT // 64 * small["weight_bytes_per_gpu"] / H100_HBM_BYTES_PER_S
    assert small["prefill_s"] == pytest.approx(read_s, rel=1e-9)
    assert small["prefill_s"] > 2 * default["prefill_s"]
    assert (default["prefill_chunk_tokens"], small["prefill_chunk_tokens"]) == (8192, 64)
    assert default["prefill_chunk_from"] == small["prefill_chunk_from"] \
        == "chunked_prefill_size"
    assert "in 4 chunks of 8,192 (chunked_prefill_size; compute roofline)" \
        in serve("--engine", "sglang")
    assert "in 512 chunks of 64 (chunked_prefill_size; compute roofline)" \
        in serve("--engine", "sglang", "--chunked-prefill-size", "64")


@pytest.mark.parametrize("gpu,vllm,sglang", [
    ("h100-sxm", 8192, 8192),  # 81,559 MB: the two agree
    ("b200", 8192, 16384),  # above 160 GB SGLang doubles its chunk
    ("a100-80gb", 2048, 8192),  # vLLM keeps the A100 at 2,048
    ("l40s", 2048, 4096),  # 48 GB: below vLLM's 70 GiB, SGLang's 35-60 GB tier
])
def test_each_engine_chunks_by_its_own_default(gpu, vllm, sglang):
    """At tp 2 each chunk runs its own all-reduces, so fewer chunks take less time: the
    two engines' prefills part exactly where their defaults do."""
    v = serve_json("--gpu", gpu, "--tp", "2")
    s = serve_json("--gpu", gpu, "--tp", "2", "--engine", "sglang")
    assert v["engine"]["max_num_batched_tokens"] == vllm
    assert s["sglang"][0]["chunked_prefill_size"] == sglang
    if vllm == sglang:
        assert s["prefill_s"] == v["prefill_s"]
    else:
        assert s["prefill_s"] < v["prefill_s"]
    assert (v["prefill_chunk_tokens"], v["prefill_chunk_from"]) \
        == (vllm, "max_num_batched_tokens")
    assert (s["prefill_chunk_tokens"], s["prefill_chunk_from"]) \
        == (sglang, "chunked_prefill_size")


def test_minus_one_keeps_the_prompt_in_one_pass():
    """H100, tp 1: 512 + 16,384 x 1.5 + 256 x 2 + 1 / 8 x 1,024 = 25,728 MB reserved (no
    piecewise graphs; above the 10,240 floor), the prompt in one chunk of the context."""
    out = serve_json("--engine", "sglang", "--chunked-prefill-size", "-1")
    assert out["prefill_chunk_tokens"] == CONTEXT
    assert out["sglang"][0]["chunked_prefill_size"] == -1
    assert out["sglang"][0]["reserved_mb"] == 25728
    assert out["prefill_s"] <= serve_json("--engine", "sglang")["prefill_s"]
    text = serve("--engine", "sglang", "--chunked-prefill-size", "-1")
    assert "in one pass (chunked_prefill_size -1: not chunked" in text
    assert "chunked prefill off" in text


@pytest.mark.parametrize("argv,needle", [
    (["--engine", "sglang", "--chunked-prefill-size", "0"],
     "chunked_prefill_size: must be -1 (chunked prefill off) or an integer in 1..16,777,216, "
     "got '0'"),
    (["--chunked-prefill-size", "-1"],
     "chunked_prefill_size: is SGLang's; give --engine sglang, or vLLM's "
     "--max-num-batched-tokens 32768"),
])
def test_a_chunk_no_engine_takes_is_refused_in_one_line(argv, needle):
    code, out, err = run("serve", QWEN, "--context", str(CONTEXT), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err
