"""SGLang's own name for the prefill chunk: --chunked-prefill-size under --engine sglang
sizes SGLang's reserve (a given value is kept over the GPU's tier: _handle_gpu_memory_
settings at sglang 0a6356ae sets the tier's only where it is None); vLLM's
--max-num-batched-tokens under SGLang, and SGLang's flag under vLLM, are refused in one
line naming the other engine's flag (the SGLang plan read neither before)."""
from pathlib import Path

import pytest

from ledger.model import llama3_8b
from ledger.serve.sglang import plan
from ledger.system import system
from test_launch_files import run

QWEN = str(Path(__file__).parent / "fixtures" / "hf" / "released" / "qwen2.5-7b.json")


def test_chunk_given_sizes_the_reserve_by_hand():
    """H100 (81,559 MB, tp 1): 512 + 16,384 x 1.5 + 256 x 2 + 1 x 1 / 8 x 1,024 + 74
    piecewise sizes up to 16,384 (8 + 14 + 8 + 8 + 12 + 24) x 8 = 26,320 MB; at 4,096 the
    sum 7,696 is raised to the 10,240 floor of GPUs above 60 GB."""
    gpu = system("h100-sxm").gpu
    big = plan(llama3_8b(), 1, 1, gpu, 16.06e9, 32, 8192, 2, None, 16384)
    small = plan(llama3_8b(), 1, 1, gpu, 16.06e9, 32, 8192, 2, None, 4096)
    tier = plan(llama3_8b(), 1, 1, gpu, 16.06e9, 32, 8192, 2)
    assert (big.chunked_prefill_size, big.reserved_mb) == (16384, 26320)
    assert (small.chunked_prefill_size, small.reserved_mb) == (4096, 10240)
    assert tier.chunked_prefill_size == 8192


@pytest.mark.parametrize("argv,needle", [
    (["--engine", "sglang", "--max-num-batched-tokens", "4096"],
     "max_num_batched_tokens: is vLLM's; SGLang's tokens per prefill chunk are "
     "--chunked-prefill-size"),
    (["--chunked-prefill-size", "4096"],
     "chunked_prefill_size: is SGLang's; give --engine sglang, or vLLM's "
     "--max-num-batched-tokens 4096"),
])
def test_the_other_engines_flag_is_refused_in_one_line(argv, needle):
    code, out, err = run("serve", QWEN, "--context", "8192", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


def test_chunked_prefill_size_reaches_sglangs_plan():
    import json
    code, out, err = run("serve", QWEN, "--context", "8192", "--engine", "sglang",
                         "--chunked-prefill-size", "16384", "--json")
    assert code == 0, err
    assert '"chunked_prefill_size": 16384' in out and '"reserved_mb": 26320' in out
    json.loads(out)


def test_a_chunk_whose_reserve_exceeds_the_gpu_is_refused_in_one_line():
    """A chunk of 65,536 tokens on an H100 (81,559 MiB): its prefill reserve alone, 65,536 x
    1.5 = 98,304 MiB (SGLang's rule, test_chunk_given_sizes_the_reserve_by_hand), is more
    than the GPU, so SGLang's default mem_fraction_static would be negative and it cannot
    start. One line naming the field and the numbers, exit 2 - not a negative fraction
    printed before 'would refuse'."""
    import re
    code, out, err = run("serve", QWEN, "--context", "8192", "--engine", "sglang",
                         "--chunked-prefill-size", "65536")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: chunked_prefill_size: ") and "65,536" in err
    reserve, gpu = (float(x.replace(",", "")) for x in re.findall(r"([\d,]+) MiB", err))
    assert gpu == 81559 and reserve > 98304
    fraction = float(re.search(r"would be (-[\d.]+)", err).group(1))
    assert fraction == round((gpu - reserve) / gpu, 3) < 0
