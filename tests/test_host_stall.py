"""A MoE forward whose host stops at the dispatch (ledger.step.host.stalls): combined 1F1B's
schedule nodes (EP overlap) or DeepEP's normal dispatch pay host_stall_s once per MoE layer,
and DeepEP's forward launches nothing while its dispatch all-to-all runs - hand arithmetic
on the segments host_excess_s prices."""
from dataclasses import replace

import numpy as np
import pytest

from ledger.model import llama3_8b, preset
from ledger.parallel import ParallelConfig
from ledger.step import DEFAULT
from ledger.step.host import deepep_waits, host_excess_s, launched_s, stall_s, stalls
from ledger.system import system

CAL = replace(DEFAULT, host_block_s=1e-3, host_router_s=1e-3, host_moe_s=4e-3,
              host_expert_s=0.0, host_stall_s=3e-3, grace_host_scale=1.0)
QWEN = preset("qwen3-30b-a3b")  # 48 layers, every one MoE
A2A = ParallelConfig(dp=8, ep=8, moe_dispatcher="alltoall")
DEEPEP = replace(A2A, moe_dispatcher="flex")  # the flex dispatcher's default kernels
HYBRIDEP = replace(DEEPEP, ep_backend="hybridep")


def test_which_layers_stop_at_the_dispatch():
    assert deepep_waits(DEEPEP) and not deepep_waits(HYBRIDEP) and not deepep_waits(A2A)
    assert bool(stalls(QWEN, DEEPEP))
    assert bool(stalls(QWEN, replace(A2A, ep_overlap=True)))
    assert bool(stalls(QWEN, replace(HYBRIDEP, ep_overlap=True)))
    assert not bool(stalls(QWEN, A2A)) and not bool(stalls(QWEN, HYBRIDEP))
    # a captured MoE block launches no schedule node; a dense model has no dispatch
    assert not bool(stalls(QWEN, replace(A2A, ep_overlap=True, cuda_graph=("moe",))))
    assert not bool(stalls(QWEN, replace(DEEPEP, cuda_graph=("full_iteration",))))
    assert not bool(stalls(llama3_8b(), DEEPEP))


def test_the_stall_is_the_forwards_and_paid_once_per_moe_layer():
    """Blocks 1 + 1 + 4 = 6 ms, a third in the forward: 2 ms, 4 ms in the backward; the
    stall 3 ms more in the forward, once when a layer has both EP overlap and DeepEP."""
    assert launched_s(QWEN, A2A, CAL) == pytest.approx((2e-3, 4e-3))
    assert launched_s(QWEN, DEEPEP, CAL) == pytest.approx((5e-3, 4e-3))
    both = replace(DEEPEP, ep_overlap=True)
    assert launched_s(QWEN, both, CAL) == pytest.approx((5e-3, 4e-3))
    # averaged over the stack: DeepSeek-V3's first three layers are dense (58 MoE of 61)
    dsv3 = preset("deepseek-v3")
    assert (dsv3.moe_layers, dsv3.layers) == (58, 61)
    assert float(stall_s(dsv3, DEEPEP, CAL)) == pytest.approx(3e-3 * 58 / 61)


def test_deepep_launches_nothing_while_its_dispatch_runs():
    """GPU forward 3 ms, 2.5 ms of it after the sync, 0.5 ms of that the dispatch.
    HybridEP: max(0.667, 0.5) + max(1.333, 2.5) = 3.167 ms (excess 0.167 ms).
    DeepEP: host 2 + 3 ms, 4/3 + 3 ms after the sync: max(0.667, 0.5) + 0.5 (the
    dispatch, the host waiting) + max(4.333, 2.5 - 0.5) = 5.5 ms (excess 2.5 ms).
    Alltoall under EP overlap: the stall, no wait: 0.667 + max(4.333, 2.5) = 5 ms."""
    gpu = (3e-3, 5e-3, 2.5e-3, 0.5e-3)
    over_f, over_b = host_excess_s(QWEN, HYBRIDEP, CAL, *gpu)
    assert float(over_f) == pytest.approx(2e-3 / 3 + 2.5e-3 - 3e-3)
    over_f, over_b = host_excess_s(QWEN, DEEPEP, CAL, *gpu)
    assert float(over_f) == pytest.approx(2e-3 / 3 + 0.5e-3 + 4e-3 / 3 + 3e-3 - 3e-3)
    assert float(over_b) == 0.0  # 4 ms of host under 5 ms of GPU: the backward never stalls
    over_f, _ = host_excess_s(QWEN, replace(A2A, ep_overlap=True), CAL, *gpu)
    assert float(over_f) == pytest.approx(2e-3 / 3 + 4e-3 / 3 + 3e-3 - 3e-3)


def test_a_grace_host_takes_its_scale_of_the_stall_too():
    from ledger.step.host import for_host

    grace = for_host(replace(CAL, grace_host_scale=1.5), system("gb200"))
    assert grace.host_stall_s == pytest.approx(4.5e-3)


def test_the_planners_arrays_of_ep_overlap_stall_where_they_overlap():
    from types import SimpleNamespace

    grid = SimpleNamespace(cuda_graph=(), ep_overlap=np.array([False, True]),
                           moe_dispatcher="alltoall", ep_backend=None)
    assert stalls(QWEN, grid).tolist() == [False, True]
    assert stalls(QWEN, SimpleNamespace(**{**vars(grid), "moe_dispatcher": "flex"})).tolist() \
        == [True, True]
