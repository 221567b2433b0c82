"""Qwen3-30B-A3B on 16 H100 as NVIDIA measured it beside the tables: the Megatron-Bridge
docs at 067f987d (NVIDIA-NeMo/Megatron-Bridge) report one shape - TP 1, PP 1, EP 16, MBS 1,
GBS 1024, BF16, Megatron's alltoall dispatcher, mock data, 2026-05-18 main - run four ways:

- docs/training/cuda-graphs.md L153-157: eager 41.36 s per step, Transformer Engine graphs
  of ``attn + moe_router + moe_preprocess`` 42.00 s ("captured successfully ... replay
  iterations 5-8 averaged 42.00 s versus 41.36 s for eager"; the shape is PR #3868's:
  "2 nodes, 8 GPUs/node, 16 GPUs total, EP=16 ... all-to-all dispatcher, TP=1, PP=1, CP=1,
  MBS=1, GBS=1024", H100 BF16);
- docs/training/communication-overlap.md L74-79: "EP=16, alltoall, CUDA graphs disabled,
  and moe_permute_fusion=false reduced steady-state step time from 41.25s to 31.31s when
  enabling EP overlap ... adding delay_wgrad_compute was neutral: 31.20s".

Priced at the 26.04 H100 row's placement (the same sizes) in BF16 with the alltoall
dispatcher. The unfused permutation is not priced. Graphing the attention block, the router
and its preprocessing gained nothing there, so the host's seconds for them were hidden; the
combined 1F1B's step bounds the host's whole time per layer and micro-batch (31.31 s over
64 micro-batches x 48 layers: 10.2 ms)."""
from dataclasses import replace

import pytest

MEASURED_S = {"eager": 41.25, "graphs": 42.00, "ep_overlap": 31.31, "ep_overlap_delayed": 31.20}
EAGER_WITH_GRAPHS_S = 41.36  # the eager run of the graphs A/B


def _steps():
    from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
    from ledger.step import estimate
    from ledger.validation.bridge import rows

    row = next(r for r in rows() if r.id == "26.04/h100/qwen3-30b-a3b/fp8_cs/16g/gbs1024/mbs1")
    row = replace(row.as_run(), precision="bf16")
    model, sysm = model_of(row), system_of(row)
    prec, _ = precision_of(row)
    cfg, _ = config_of(row, prec, model)
    eager = replace(cfg, moe_dispatcher="alltoall")
    assert (eager.tp, eager.pp, eager.ep, eager.micro_batch, eager.num_microbatches,
            eager.world, eager.cuda_graph, eager.ep_overlap) == (1, 1, 16, 1, 64, 16, (), False)
    runs = {"eager": eager,
            "graphs": replace(eager, cuda_graph=("attn", "moe_router", "moe_preprocess")),
            "ep_overlap": replace(eager, ep_overlap=True),
            "ep_overlap_delayed": replace(eager, ep_overlap=True, delay_wgrad=True)}
    return {k: estimate(model, c, sysm, precision=prec, optimizer="adam",
                        tp_overlap=tp_overlap(row)).step_time_s for k, c in runs.items()}


def test_the_eager_and_graphed_steps_within_20_percent_of_nvidias():
    got = _steps()
    for k in ("eager", "graphs"):
        assert abs(got[k] / MEASURED_S[k] - 1) < 0.20, (k, got[k], MEASURED_S[k])


@pytest.mark.xfail(strict=True, reason="measured: the host model prices the eager step "
                   "launch-bound (50.0 s at the shipped constants) and the graphed one at "
                   "47.0 s, a 6% gain where NVIDIA measured none (41.36 -> 42.00 s); "
                   "with EP overlap it prices 41.9 s, host-bound at 13.6 ms of host "
                   "per layer and micro-batch, against 31.31 s measured (10.2 ms in all)")
def test_graphs_and_ep_overlap_move_the_step_as_nvidia_measured():
    got = _steps()
    assert got["graphs"] / got["eager"] == pytest.approx(
        MEASURED_S["graphs"] / EAGER_WITH_GRAPHS_S, abs=0.05)
    assert got["eager"] / got["ep_overlap"] == pytest.approx(
        MEASURED_S["eager"] / MEASURED_S["ep_overlap"], rel=0.10)
    assert abs(got["ep_overlap"] / MEASURED_S["ep_overlap"] - 1) < 0.15
