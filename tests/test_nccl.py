"""NCCL's cost model (src/graph/tuning.cc at NCCL 2.30.7): latencies by hand from its
constants, the least-time choice, and the bandwidth of groups that span nodes."""
import numpy as np
import pytest

from ledger.step.nccl import collective_s, group_bandwidth, latency_us


def test_ring_latency_is_linear_in_the_group():
    """Ring, Simple, one node of 8: base 8.4 + 2 x 7 steps of NVLink's 3.4 us; two nodes of
    8: 28 NVLink steps (3.4 >= the 3 x 1 us net overhead) and 2 network steps of 14 us."""
    assert latency_us("all_reduce", "ring", "Simple", 8, 1) == pytest.approx(8.4 + 14 * 3.4)
    assert latency_us("all_reduce", "ring", "Simple", 16, 2) == pytest.approx(
        8.4 + 28 * 3.4 + 2 * 14.0)
    # all-gather at 1536 ranks on 192 nodes: 1535 steps, 191 across nodes
    assert latency_us("all_gather", "ring", "Simple", 1536, 192) == pytest.approx(
        8.4 + 1344 * 3.4 + 191 * 14.0)


def test_tree_latency_is_logarithmic_in_the_nodes():
    """Tree all-reduce, 1536 ranks one per node: 2 (0 x intra + log2(1536) = 10 x 14 us);
    LL: 6.8 + 2 x 10 x 5.0. PAT all-gather: 8 + 10 x 14 / 3.5 + 2.8 x 1536."""
    assert latency_us("all_reduce", "tree", "Simple", 1536, 1536) == pytest.approx(8.4 + 280)
    assert latency_us("all_reduce", "tree", "LL", 1536, 1536) == pytest.approx(106.8)
    assert latency_us("all_gather", "pat", "Simple", 1536, 1536) == pytest.approx(
        8 + 40 + 2.8 * 1536)


def test_the_least_time_is_chosen():
    """An empty call costs the least latency (tree LL for an all-reduce over 1536 nodes,
    PAT for an all-gather); a large one the Simple ring: its latency (8.4 + 56 x 3.4 +
    7 x 14 us over 64 ranks on 8 nodes) plus 1 GB at 40 GB/s."""
    assert collective_s("all_reduce", 0.0, 1536, 1536, 40e9, "hopper") == pytest.approx(106.8e-6)
    assert collective_s("all_gather", 0.0, 1536, 1536, 40e9, "hopper") == pytest.approx(
        (48 + 2.8 * 1536) * 1e-6)
    assert collective_s("reduce_scatter", 1e9, 64, 8, 40e9, "hopper") == pytest.approx(
        (8.4 + 56 * 3.4 + 7 * 14.0) * 1e-6 + 1e9 / 40e9)
    assert collective_s("all_reduce", 1e9, 1, 1, 40e9, "hopper") == 0.0


def test_a_group_across_nodes_moves_through_its_ranks_nics_over_two_nodes():
    """NVLink inside a node; over two nodes the NICs of the group's ranks on a node (NCCL
    prices a two-node ring at its intra channels, tuning.cc L306/L324), up to NVLink's -
    one rank per node keeps its own NIC; beyond two nodes each rank its own NIC."""
    assert group_bandwidth(240e9, 20e9, 1) == pytest.approx(240e9)
    assert group_bandwidth(240e9, 20e9, 2) == pytest.approx(20e9)
    assert group_bandwidth(240e9, 20e9, 2, 8) == pytest.approx(160e9)
    assert group_bandwidth(240e9, 20e9, 2, 32) == pytest.approx(240e9)
    assert group_bandwidth(240e9, 20e9, 4) == pytest.approx(20e9)
    assert group_bandwidth(240e9, 20e9, 4, 8) == pytest.approx(20e9)
    nodes, per = np.array([2, 2, 2, 8]), np.array([1, 4, 16, 16])  # the planner's arrays
    assert group_bandwidth(240e9, 20e9, nodes, per) == pytest.approx(
        [20e9, 80e9, 240e9, 20e9])


def test_a_launch_without_nvls_is_timed_without_it():
    """NCCL_NVLS_ENABLE=0 (``nccl_nvls=False``; Megatron-Bridge's launchers set it) takes
    NVLS out of the step's collectives as it takes NVLS's buffers out of memory: 8 H100s'
    DP all-reduce times as on a switch that does not reduce (before, only the buffers went)."""
    from dataclasses import replace

    from ledger.config import ParallelConfig
    from ledger.model import llama3_8b
    from ledger.step import estimate
    from ledger.system import system

    m, h100 = llama3_8b(), system("h100-sxm")
    assert h100.nvls
    on = estimate(m, ParallelConfig(dp=8), h100)
    off = estimate(m, ParallelConfig(dp=8, nccl_nvls=False), h100)
    plain = estimate(m, ParallelConfig(dp=8), replace(h100, nvls=False))
    assert off.step_time_s == plain.step_time_s > on.step_time_s


@pytest.mark.parametrize("grad_dtype,element", [("fp32", 4), ("bf16", 2)])
def test_dp_buckets_count_parameters_whatever_the_dtype(grad_dtype, element):
    """Megatron's --ddp-bucket-size counts parameters (training.py L2179-2194 @d98e8a64):
    8,030,261,248 parameters' gradients in 10M-parameter buckets are 804 reduce-scatters
    at the step's end, in fp32 or bf16 (bf16 had been counted as half the calls)."""
    from types import SimpleNamespace

    from ledger.config import ParallelConfig
    from ledger.step.dp import buckets

    params, ranks = 8_030_261_248, 8
    cfg = ParallelConfig(dp=ranks, zero_stage=1, framework="megatron", grad_dtype=grad_dtype,
                         overlap_grad_reduce=True, dp_bucket_params=10_000_000)
    row = SimpleNamespace(kind="reduce_scatter", ranks=ranks,
                          bytes=params * element * (ranks - 1) / ranks)
    assert buckets(cfg, row, ranks) == 804
