"""Hypothesis profiles. ``ci`` (the default) draws the same examples every run, so the
suite's verdict on a commit does not depend on the day it runs; ``explore``
(``HYPOTHESIS_PROFILE=explore make test``) draws fresh ones, to look for new failures -
each one found is kept as a plain test beside the property that found it."""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# a two-layer GPT launch the Megatron reader takes whole (NullTokenizer, BF16), for tests
# of one flag's reading
TINY_LAUNCH = ("--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
               "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 "
               "--vocab-size 32000 --tokenizer-type NullTokenizer --bf16")


@pytest.fixture
def tiny_launch(tmp_path):
    """read(extra): ledger.io.megatron.reader.read_launch of TINY_LAUNCH plus ``extra`` on
    8 GPUs, written to a file under the test's tmp_path."""
    from ledger.io.megatron import reader

    def read(extra: str = ""):
        f = tmp_path / "flags.txt"
        f.write_text(f"{TINY_LAUNCH} {extra}".rstrip())
        return reader.read_launch(str(f), gpus=8)
    return read
