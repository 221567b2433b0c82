"""DeepSeek-V3's expert traffic as its report runs it (PP 16, EP 64, ZeRO-1 on 2,048 GPUs;
its placement DSV3 and token row ROW are test_moe's): the all-to-all and all-gather rows
by hand, node-limited routing, and the report and estimate end to end."""
from dataclasses import replace

import pytest

from ledger.cli import main
from ledger.model import deepseek_v3
from ledger.parallel import ParallelConfig, place
from test_moe import DSV3, GiB, ROW, ep_rows


# per rank: 4096 tokens x top-8 rows; 58 MoE layers / 16 stages; 120 micro-batches;
# 4 passes (dispatch, combine, forward and backward)
PASSES = 4 * 58 / 16 * 120


def test_deepseek_v3_alltoall_rows():
    """EP 64 over 8 nodes of 8: a row stays home 1/64, reaches another GPU of its node
    7/64, another node 56/64 of the time."""
    rows = ep_rows(place(deepseek_v3(), ParallelConfig(**DSV3)))
    payload = 4096 * 8 * ROW * PASSES
    assert rows == pytest.approx({("all_to_all", "ib", "routed tokens, other nodes"):
                                  payload * 56 / 64,
                                  ("all_to_all", "nvlink", "routed tokens, same node"):
                                  payload * 7 / 64})
    assert rows[("all_to_all", "ib", "routed tokens, other nodes")] / GiB == \
        pytest.approx(666.09, abs=0.01)


def test_deepseek_v3_allgather_rows():
    """Allgather over the 64 EP ranks (etp 1): 4096 x 64 rows gathered, 63/64 of them
    from others, in the forward and the combine's backward (2 of the 4 passes); the
    reduce-scatter as many times."""
    rows = ep_rows(place(deepseek_v3(), ParallelConfig(**DSV3, moe_dispatcher="allgather")))
    tokens = 63 / 64 * 4096 * 64 * ROW * PASSES / 2
    assert rows[("all_gather", "ib", "tokens of the ETP x EP group")] == pytest.approx(tokens)
    assert rows[("reduce_scatter", "ib", "expert outputs, combined")] == pytest.approx(tokens)


def test_node_limited_routing_halves_the_ib_row():
    """DeepSeek-V3's dispatch (flex / DeepEP, report sec. 3.2.2): a token crosses IB once
    per other destination node. Node-limited, 4 of 8 groups (one group per node): exactly
    4 nodes, the own one among them 4/8 of the time: 4 x 7/8 = 3.5 IB copies per token,
    half of alltoall's 8 x 56/64 = 7 rows. Unlimited: 8 of 256 experts, a node (32
    experts) missed with probability prod_{i<8} (224 - i)/(256 - i)."""
    m = deepseek_v3()
    flex = ParallelConfig(**DSV3, moe_dispatcher="flex")
    limited = ep_rows(place(m, flex))
    ib_limited = limited[("all_to_all", "ib",
                          "routed tokens, one copy per node (<= 4 of 8 groups per token)")]
    assert ib_limited == pytest.approx(4096 * 3.5 * ROW * PASSES)
    alltoall_ib = ep_rows(place(m, ParallelConfig(**DSV3)))[
        ("all_to_all", "ib", "routed tokens, other nodes")]
    assert ib_limited == pytest.approx(alltoall_ib / 2)
    miss = 1.0
    for i in range(8):
        miss *= (224 - i) / (256 - i)
    free = ep_rows(place(replace(m, router_group_topk=8), flex))
    ib_free = free[("all_to_all", "ib", "routed tokens, one copy per node")]
    assert ib_free == pytest.approx(4096 * 8 * (1 - miss) * 7 / 8 * ROW * PASSES)
    assert ib_limited < ib_free < alltoall_ib
    # forwarded inside the node: each of the 8 rows lands off the receiving GPU 7/8
    assert limited[("all_to_all", "nvlink", "routed tokens, forwarded in the node")] == \
        pytest.approx(4096 * 8 * 7 / 8 * ROW * PASSES)


def test_node_limits_do_not_change_alltoall_rows():
    """Megatron's alltoall sends every (token, expert) row to its GPU: node limits move
    rows between nodes, not their count (a row stays on its node 1/8 either way)."""
    m = deepseek_v3()
    free = replace(m, router_group_topk=8)
    assert ep_rows(place(m, ParallelConfig(**DSV3))) == \
        ep_rows(place(free, ParallelConfig(**DSV3)))


def test_deepseek_v3_reports_from_the_cli(capsys):
    argv = ["report", "deepseek-v3", "--pp", "16", "--ep", "64", "--gpus", "2048", "--zero",
            "1", "--seq", "4096", "--global-batch", "15360"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dp=128" in out and "m=120" in out and "etp=1 dispatcher=alltoall" in out
    assert "666.09 GiB" in out  # the IB all-to-all row above
    assert main(argv + ["--moe-token-dispatcher-type", "flex"]) == 0
    assert "333.05 GiB" in capsys.readouterr().out  # half of it


def test_deepseek_v3_reported_and_estimated_end_to_end(capsys):
    """The run DeepSeek-V3's report describes (PP 16, EP 64, ZeRO-1, FP8 on 2048 H800):
    report and estimate both price it; its published parameter counts travel with it."""
    import json

    from ledger.cli import main

    run = ["deepseek-v3", "--pp", "16", "--ep", "64", "--gpus", "2048", "--zero", "1",
           "--seq", "4096", "--global-batch", "15360", "--gpu", "h800", "--precision", "fp8",
           "--fp8-recipe", "deepseek-v3", "--moe-token-dispatcher-type", "flex", "--json"]
    assert main(["report", *run]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["params"] == 671_026_404_352 and round(rep["active_params"] / 1e9) == 38
    assert {c["axis"] for c in rep["comms"]} >= {"pp", "dp", "ep"}
    assert main(["estimate", *run]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["config"]["ep"] == 64 and est["config"]["dp"] == 128
    assert est["memory"]["total"] == pytest.approx(rep["memory"]["total"])
    assert est["step_time_s"] > 0 and 0 < est["mfu"] < 1
