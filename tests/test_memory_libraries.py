"""Buffers the libraries under a framework allocate (issue 31): CUDA graphs' static
buffers, DeepEP / HybridEP's, NCCL's, optimizer CPU offload and fine-grained activation
offloading - each by hand from its source's sizing rule (the rules' sources are in each
module's docstring), and each named in report / estimate."""
import json

import pytest

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.parallel import place
from test_bad_input import run

MiB = 2**20


def _llama8b():
    from ledger.model import llama3_8b

    return llama3_8b()


# -- CUDA graphs -----------------------------------------------------------------------
def test_cuda_graph_static_grad_outputs_by_hand():
    from ledger.placement.graphs import graph_buffers

    cfg = ParallelConfig(tp=2, dp=4, cuda_graph=("attn", "mlp"))
    # one hidden-state tensor: s b / (tp under SP) x h x 2 B (TE graph.py L803-818)
    assert graph_buffers(_llama8b(), cfg) == {"CUDA-graph static grad outputs":
                                              8192 * 1 / 2 * 4096 * 2}
    assert graph_buffers(_llama8b(), ParallelConfig(tp=2, dp=4)) == {}
    assert graph_buffers(_llama8b(), ParallelConfig(
        tp=2, dp=4, cuda_graph=("full_iteration",))) == {}  # not derivable: unpriced
    no_sp = ParallelConfig(tp=2, dp=4, sequence_parallel=False, cuda_graph=("attn",))
    assert graph_buffers(_llama8b(), no_sp)["CUDA-graph static grad outputs"] == 8192 * 4096 * 2


def test_cuda_graph_buffer_is_kept_and_named():
    m = _llama8b()
    eager = place(m, ParallelConfig(tp=2, dp=4)).memory
    graphed = place(m, ParallelConfig(tp=2, dp=4, cuda_graph=("attn", "mlp"))).memory
    assert graphed.allocated_bytes - eager.allocated_bytes == 32 * MiB
    assert dict(graphed.named)["CUDA-graph static grad outputs"] == 32 * MiB
    code, out, err = run(["estimate", "llama3-8b", "--gpus", "8", "--tp", "2",
                          "--cuda-graph-scope", "attn,mlp"])
    assert code == 0, err
    assert "CUDA-graph static grad outputs 32.00 MiB" in out
    code, out, err = run(["report", "llama3-8b", "--gpus", "8", "--tp", "2",
                          "--cuda-graph-scope", "attn,mlp", "--json"])
    assert json.loads(out)["memory"]["kept"]["CUDA-graph static grad outputs"] == 32 * MiB
