"""serve --block-size as vLLM's own flag takes it: one of its CacheConfig's BlockSize
(1, 8, 16, 32, 64, 128, 256: vllm/config/cache.py L22 at c1d86421, the flag's argparse
choices through arg_utils.literal_to_kwargs); any other is refused in one line, exit 2."""
from pathlib import Path

import pytest

from test_launch_files import run

QWEN = str(Path(__file__).parent / "fixtures" / "hf" / "released" / "qwen2.5-7b.json")


@pytest.mark.parametrize("size", ["48", "512", "2"])
def test_a_block_size_vllm_does_not_take_is_refused(size):
    code, out, err = run("serve", QWEN, "--context", "8192", "--block-size", size)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"--block-size {size}: vLLM takes one of 1, 8, 16, 32, 64, 128, 256" in err


@pytest.mark.parametrize("size", ["1", "32", "256"])
def test_vllms_block_sizes_are_priced(size):
    code, _, err = run("serve", QWEN, "--context", "8192", "--block-size", size)
    assert code == 0, err
