"""What a user types for serve and for a fine-tune (report / estimate / plan --finetune):
zero, negative, NaN, absurd sizes and flags the model or the engine would ignore, each
refused in one line naming the field with the numbers, exit 2, no traceback. The cases the
last review found accepted come first (each its own why); the rest hold what already held."""
from pathlib import Path

import pytest

from test_bad_input import assert_refused, run

S = ["serve", "llama3-8b", "--gpu", "h100-sxm", "--context", "8192"]
F = ["report", "llama3-8b", "--gpus", "8", "--finetune", "lora"]
KV_BYTES = ["--kv-cache-memory-bytes", "10000000000"]
GPT_OSS = Path(__file__).parent / "fixtures" / "serve" / "gpt-oss-120b.json"

# argv, the line's start (field and the numbers it names)
IGNORED = [
    # vLLM sizes the pool from --kv-cache-memory-bytes and ignores gpu_memory_utilization
    # (vllm/config/cache.py at 002f10e0); the profile's figures size nothing then
    (S + KV_BYTES + ["--gpu-memory-utilization", "0.8"],
     "error: gpu_memory_utilization: has no effect with --kv-cache-memory-bytes 10000000000"),
    (S + KV_BYTES + ["--cudagraph-gib", "1"],
     "error: cudagraph_gib: has no effect with --kv-cache-memory-bytes 10000000000"),
    (S + KV_BYTES + ["--non-torch-gib", "1"],
     "error: non_torch_gib: has no effect with --kv-cache-memory-bytes 10000000000"),
    (S + KV_BYTES + ["--sampler", "sort"],
     "error: sampler: has no effect with --kv-cache-memory-bytes 10000000000"),
    # a dense model on one GPU: --enable-expert-parallel leaves ep at 1, places nothing
    (S + ["--enable-expert-parallel"],
     "error: enable_expert_parallel: has no effect: llama3-8b has no experts"),
    # the MXFP4 backend lays out MXFP4 experts; llama3-8b's weights are bf16
    (S + ["--mxfp4-backend", "marlin"],
     "error: mxfp4_backend: has no effect: llama3-8b's weights are bf16, not MXFP4"),
    (S + ["--quantization", "fp8", "--mxfp4-backend", "triton"],
     "error: mxfp4_backend: has no effect: llama3-8b's weights are fp8"),
    # vLLM's scheduler decodes at most max_num_seqs sequences a step (1024 on an H100)
    (S + ["--batch", "100000"], "error: batch: batch(100000) > max_num_seqs(1024)"),
    (S + ["--max-num-seqs", "4", "--batch", "64"], "error: batch: batch(64) > max_num_seqs(4)"),
    # Megatron-FSDP's double buffers exist at ZeRO-3 only
    (F + ["--fsdp-double-buffer"], "error: fsdp_double_buffer: has no effect at --zero 0"),
    # ... and of the params resharded after forward (placement.buffers: none without it)
    (["estimate", "llama3-8b", "--gpus", "8", "--zero", "3", "--no-reshard",
      "--fsdp-double-buffer"], "error: fsdp_double_buffer: has no effect with --zero 3 --no-reshard"),
]

HELD = [
    (S[:-1] + ["0"], "error: context: must be an integer in 1..16,777,216, got '0'"),
    (S[:-1] + ["-5"], "error: context: must be an integer in 1..16,777,216, got '-5'"),
    (S[:-1] + ["nan"], "error: context: must be an integer in 1..16,777,216, got 'nan'"),
    (S[:-1] + ["1e30"], "error: context: must be an integer in 1..16,777,216, got '1e30'"),
    (S + ["--batch", "0"], "error: batch: must be an integer in 1..1,048,576, got '0'"),
    (S + ["--tp", "-2"], "error: tp: must be an integer in 1..1,048,576, got '-2'"),
    (S + ["--tp", "3"], "error: heads: heads(32) is not divisible by tp(3)"),
    (S + ["--gpu-memory-utilization", "nan"],
     "error: gpu_memory_utilization: must be a finite number in (0, 1], got 'nan'"),
    (S + ["--kv-cache-memory-bytes", "1e40"], "error: kv_cache_memory_bytes: must be an "
                                              "integer in 1..1,125,899,906,842,624, got '1e40'"),
    (S + ["--block-size", "100000000"],
     "error: block_size: must be an integer in 1..65,536, got '100000000'"),
    (S + ["--non-torch-gib", "inf"],
     "error: non_torch_gib: must be a finite number in [0, 1.04858e+06], got 'inf'"),
    (S + ["--engine", "sglang", "--mem-fraction-static", "0"],
     "error: mem_fraction_static: must be a finite number in (0, 1], got '0'"),
    (S + ["--engine", "sglang", "--block-size", "32"], "error: block_size: sets vLLM's memory "
                                                       "plan, which --engine sglang does not run"),
    (S + ["--gpu-memory", "-4"],
     "error: gpu_memory: must be a finite number in (0, 1.04858e+06], got '-4'"),
    (F + ["--lora-rank", "0"], "error: lora_rank: must be an integer in 1..65,536, got '0'"),
    (F + ["--lora-rank", "1e12"], "error: lora_rank: must be an integer in 1..65,536, got '1e12'"),
    (F + ["--lora-alpha", "nan"],
     "error: lora_alpha: must be a finite number in (0, 1e+06], got 'nan'"),
    (F + ["--lora-dropout", "1.5"],
     "error: lora_dropout: must be a finite number in [0, 1], got '1.5'"),
    (F + ["--no-double-quant"], "error: no_double_quant: --no-double-quant does not apply to "
                                "--finetune lora"),
    (F + ["--freeze", "embedding"], "error: freeze: lora already freezes the whole base"),
    (["report", "llama3-8b", "--gpus", "8", "--finetune", "full", "--lora-rank", "16"],
     "error: lora_rank: --lora-rank does not apply to --finetune full"),
    (["report", "llama3-8b", "--gpus", "8", "--finetune", "full", "--freeze-layers", "0:999"],
     "error: freeze_layers: stop(999) is past the model's layers(32)"),
    (["estimate", "llama3-8b", "--gpus", "8", "--finetune", "lora", "--tokens", "nan"],
     "error: tokens: must be a finite number in [1, 1e+15], got 'nan'"),
    (["plan", "llama3-8b", "--finetune", "lora", "--gpus", "8", "--headroom", "-1"],
     "error: headroom: must be a finite number in [0, 1.04858e+06], got '-1'"),
]


@pytest.mark.parametrize("argv,line", IGNORED + HELD)
def test_serve_and_finetune_input_is_refused_in_one_line(argv, line):
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err.startswith(line), err


def test_what_is_not_ignored_still_prices():
    """The same flags where they do act: the backend on an MXFP4 checkpoint, the batch at
    max_num_seqs, --kv-cache-memory-bytes alone, EP over a MoE's GPUs."""
    for argv in (["serve", str(GPT_OSS), "--gpu", "h100-sxm",
                  "--context", "8192", "--mxfp4-backend", "marlin"],
                 S + ["--max-num-seqs", "64", "--batch", "64"], S + KV_BYTES,
                 ["serve", "qwen3-30b-a3b", "--tp", "2", "--enable-expert-parallel",
                  "--context", "8192"]):
        code, out, err = run(argv)
        assert code == 0 and err == "" and "served:" in out, (argv, err)
