"""The host's share of a step (ledger.step.host), the pipeline's overlapped sends, and what
a Megatron launch sets of them: hand arithmetic on the blocks a layer launches, the
segments a dropless MoE forward runs in, and the shipped constants as the fit's argmin."""
from dataclasses import replace

import pytest

from ledger.config import MoESpec
from ledger.model import llama3_8b, preset
from ledger.parallel import ParallelConfig
from ledger.step import DEFAULT, estimate
from ledger.step.host import host_excess_s, layer_host_s, syncs
from ledger.system import system

CAL = replace(DEFAULT, host_block_s=1e-3, host_router_s=1e-3, host_moe_s=4e-3,
              host_expert_s=0.0)
QWEN = preset("qwen3-30b-a3b")  # 48 layers, every one MoE


def test_blocks_a_layer_launches_eagerly_and_under_graphs():
    dense = ParallelConfig()
    assert layer_host_s(llama3_8b(), dense, CAL) == pytest.approx(2e-3)  # attention + MLP
    assert layer_host_s(llama3_8b(), replace(dense, cuda_graph=("attn",)), CAL) == \
        pytest.approx(1e-3)
    moe = ParallelConfig(dp=8, ep=8)
    # attention 1 + router and preprocess 1 + the expert part 4 (ms)
    assert layer_host_s(QWEN, moe, CAL) == pytest.approx(6e-3)
    half = ParallelConfig(dp=8, ep=8, cuda_graph=("moe_router",))
    assert layer_host_s(QWEN, half, CAL) == pytest.approx(5.5e-3)
    graphed = ParallelConfig(dp=8, ep=8, cuda_graph=("attn", "moe_router", "moe_preprocess"))
    assert layer_host_s(QWEN, graphed, CAL) == pytest.approx(4e-3)
    whole = ParallelConfig(dp=8, ep=8, cuda_graph=("full_iteration",))
    assert layer_host_s(QWEN, whole, CAL) == 0.0


def test_a_moe_router_has_its_own_host_seconds_a_dense_layer_never_pays():
    cal = replace(CAL, host_router_s=3e-3)
    assert layer_host_s(QWEN, ParallelConfig(dp=8, ep=8), cal) == pytest.approx(8e-3)  # 1+3+4
    half = ParallelConfig(dp=8, ep=8, cuda_graph=("moe_preprocess",))
    assert layer_host_s(QWEN, half, cal) == pytest.approx(6.5e-3)
    assert layer_host_s(llama3_8b(), ParallelConfig(), cal) == pytest.approx(2e-3)


def test_a_dropless_forward_runs_in_two_segments_the_host_cannot_overlap():
    """Host forward = 6/3 = 2 ms, of which the expert part 4/3 ms follows the sync; GPU
    forward 3 ms, 2.5 ms of it after the sync: max(0.667, 0.5) + max(1.333, 2.5) = 3.167
    ms, 0.167 ms more than the GPU's. Padded to capacity the host runs ahead: max(2, 3)."""
    cfg = ParallelConfig(dp=8, ep=8)
    assert syncs(QWEN, cfg)
    over_f, over_b = host_excess_s(QWEN, cfg, CAL, 3e-3, 5e-3, 2.5e-3)
    assert float(over_f) == pytest.approx(2e-3 / 3 + 2.5e-3 - 3e-3)
    assert float(over_b) == pytest.approx(0.0)  # 4 ms of host under 5 ms of GPU
    padded = replace(cfg, moe=MoESpec(pad_to_capacity=True))
    assert not syncs(QWEN, padded)
    assert float(host_excess_s(QWEN, padded, CAL, 3e-3, 5e-3, 2.5e-3)[0]) == 0.0
    over_f, over_b = host_excess_s(QWEN, padded, CAL, 1e-3, 3e-3, 0.5e-3)
    assert (float(over_f), float(over_b)) == pytest.approx((1e-3, 1e-3))


def test_a_small_moe_is_host_bound_and_says_so():
    """Qwen3-30B-A3B, one sequence per micro-batch on 8 B200: its layers' kernels are
    shorter than the host's launches; 'host' is a named term of the step."""
    cfg = ParallelConfig(dp=8, ep=8, num_microbatches=64, moe_dispatcher="flex")
    est = estimate(QWEN.with_seq(4096), cfg, system("b200"))
    assert est.breakdown["host"] > 0.3 * est.step_time_s
    eager = estimate(llama3_8b(), ParallelConfig(tp=4, num_microbatches=8), system("h100-sxm"))
    assert "host" not in eager.breakdown  # 8K tokens of a dense 8B at TP 4 hide the launches
    # at the fitted constants a dense block's launches cost the host nothing the GPU does
    # not hide (host_block_s 0.5 ms since the joint stage 3 / 5 refit: the calibration rows put
    # the host's cost on the MoE layers), so a thin TP 8 split shows none either
    thin = estimate(llama3_8b(), ParallelConfig(tp=8, num_microbatches=8), system("h100-sxm"))
    assert "host" not in thin.breakdown


def test_interleaved_sends_overlap_by_default_in_megatron_only():
    assert ParallelConfig(pp=4, vp=2, num_microbatches=8).overlap_p2p
    assert not ParallelConfig(pp=4, num_microbatches=8).overlap_p2p  # 1F1B: blocking
    assert not ParallelConfig(pp=4, vp=2, num_microbatches=8, framework="torchtitan",
                              zero_stage=3).overlap_p2p
    m, sysm = llama3_8b(), system("h100-sxm")
    on = estimate(m, ParallelConfig(pp=4, vp=2, dp=2, num_microbatches=8), sysm)
    off = estimate(m, ParallelConfig(pp=4, vp=2, dp=2, num_microbatches=8, overlap_p2p=False),
                   sysm)
    assert on.breakdown.get("pp_comm", 0.0) < off.breakdown["pp_comm"]
    assert on.step_time_s < off.step_time_s


def test_megatron_launch_sets_graphs_p2p_and_the_flex_backend(tmp_path):
    from ledger.io.megatron.reader import read_launch

    flags = tmp_path / "qwen.flags"
    flags.write_text(
        "--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --group-query-attention "
        "--num-query-groups 4 --kv-channels 128 --ffn-hidden-size 6144 --seq-length 4096 "
        "--max-position-embeddings 4096 --swiglu --normalization RMSNorm "
        "--disable-bias-linear --untie-embeddings-and-output-weights "
        "--num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 "
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
        "--expert-model-parallel-size 8 --pipeline-model-parallel-size 2 "
        "--num-layers-per-virtual-pipeline-stage 2 --no-overlap-p2p-communication "
        "--micro-batch-size 1 --global-batch-size 512 --bf16 "
        "--tokenizer-type NullTokenizer --vocab-size 151936 "
        "--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router\n")
    launch = read_launch(str(flags), gpus=16)
    assert launch.flags["cuda_graph_scope"] == ("attn", "moe_router")
    assert launch.flags["ep_backend"] == "hybridep"
    assert launch.flags["overlap_p2p"] is False
    assert not launch.unpriced
    drop = tmp_path / "drop.flags"
    drop.write_text(flags.read_text().replace("--moe-token-dispatcher-type flex "
                                              "--moe-flex-dispatcher-backend hybridep",
                                              "--moe-token-dispatcher-type alltoall "
                                              "--moe-expert-capacity-factor 1.0 "
                                              "--moe-pad-expert-input-to-capacity"))
    padded = read_launch(str(drop), gpus=16)
    assert padded.flags["capacity_factor"] == 1.0 and padded.flags["pad_to_capacity"]
    assert not padded.unpriced
    whole = tmp_path / "whole.flags"
    whole.write_text(flags.read_text().replace(" --cuda-graph-scope attn moe_router", ""))
    assert read_launch(str(whole), gpus=16).flags["cuda_graph_scope"] == (
        "attn", "mlp", "mamba", "moe_router", "moe_preprocess")


def test_shipped_host_constants_are_the_fits_argmin_among_their_neighbours():
    """benchmarks/fit.py stage 3 prints render.bridge_fit.fit_host(); the shipped constants were
    its first line when last refitted and must stay a local argmin (docs/step-time.md says
    where the whole grid's argmin now lies). The whole grid takes minutes: here the shipped
    point against each grid neighbour (one step along each axis)."""
    from ledger.render.bridge_fit import HOST_GRID, host_score

    shipped = (DEFAULT.host_block_s, DEFAULT.host_router_s, DEFAULT.host_moe_s,
               DEFAULT.host_expert_s, DEFAULT.host_stall_s)
    at = [axis.index(v) for axis, v in zip(HOST_GRID, shipped)]
    best = host_score(*shipped)[0]
    for axis in range(len(HOST_GRID)):
        for step in (-1, 1):
            k = at[axis] + step
            if 0 <= k < len(HOST_GRID[axis]):
                point = list(shipped)
                point[axis] = HOST_GRID[axis][k]
                assert host_score(*point)[0] > best, point


def test_shipped_blackwell_share_is_stage_4s_argmin_among_its_neighbours():
    """benchmarks/fit.py stage 4 prints render.bridge_fit.fit_share(): one GEMM share for
    the Blackwell parts, Blackwell Ultra's rate over it and the grouped GEMMs' share of the
    dense rate, fitted together on the release's calibration rows with the host's constants
    as shipped; the shipped triple beats its grid neighbours along each axis, the sm_100
    parts carry the share and the sm_103 ones the share times the rate."""
    from ledger.render.bridge_fit import (BLACKWELL_SHARE_GRID, GROUPED_SHARE_GRID, ULTRA,
                                         ULTRA_RATE_GRID, share_score)
    from ledger.system import GPUS
    from ledger.system.chips import BLACKWELL_SHARE, ULTRA_RATE

    assert {GPUS[g].gemm_efficiency for g in ("b200", "gb200")} == {BLACKWELL_SHARE}
    assert {GPUS[g].gemm_efficiency for g in ULTRA} == {BLACKWELL_SHARE * ULTRA_RATE}
    assert {GPUS[g].cuda_capability for g in ULTRA} == {(10, 3)}
    shipped = (BLACKWELL_SHARE, DEFAULT.grouped_gemm_share, ULTRA_RATE)
    grids = (BLACKWELL_SHARE_GRID, GROUPED_SHARE_GRID, ULTRA_RATE_GRID)
    at = [g.index(v) for g, v in zip(grids, shipped)]
    best, _, n = share_score(*shipped)
    assert n >= 30  # the calibration release's rows that run (36 here)
    for axis in (0, 1, 2):
        for k in (at[axis] - 1, at[axis] + 1):
            if 0 <= k < len(grids[axis]):
                point = list(shipped)
                point[axis] = grids[axis][k]
                assert share_score(*point)[0] > best, point


def test_blackwell_ultra_rate_moves_the_gemms_not_the_measured_attention():
    """chips.ULTRA_RATE scales what an sm_103 part's GEMMs sustain (GB300 against GB200 at
    the same BF16 peak: its seconds over the rate), not the attention core, which runs at
    cuDNN's measured GB300 rate whatever the GEMM share (system.attention)."""
    from ledger.step.gemm import gemm_s
    from ledger.step.layer_time import layer_times
    from ledger.system import GPUS

    gb200, gb300 = GPUS["gb200"], GPUS["gb300"]
    assert gb300.bf16_flops == gb200.bf16_flops
    one = replace(gb300, gemm_efficiency=gb200.gemm_efficiency)
    fast = replace(gb300, gemm_efficiency=1.3 * gb200.gemm_efficiency)
    assert gemm_s(8192, 8192, 8192, one, CAL) / gemm_s(8192, 8192, 8192, fast, CAL) \
        == pytest.approx(1.3)
    m, cfg, sysm = llama3_8b().with_seq(8192), ParallelConfig(), system("gb300")
    links = dict.fromkeys(("tp", "cp", "ep", "pp"), "nvlink")
    slow_t, fast_t = (layer_times(m, cfg, replace(sysm, gpu=g), links, CAL) for g in (one, fast))
    assert fast_t.attention == pytest.approx(slow_t.attention)
    assert slow_t.gemm / fast_t.gemm == pytest.approx(1.3)


def test_a_grace_host_takes_the_fitted_scale_of_an_x86_hosts_seconds():
    """GB200 / GB300 NVL72 trays run Grace (Arm Neoverse V2) hosts, B200 / B300 / H100 x86
    ones (system.HOST_CPU_SOURCES); a Grace host's seconds per block are
    Calibration.grace_host_scale times the four constants, an x86 host's the four."""
    from ledger.step.host import for_host

    assert system("gb200").host_cpu == system("gb300").host_cpu == "grace"
    assert system("b200").host_cpu == system("b300").host_cpu == "x86"
    assert system("h100-sxm").host_cpu == "x86"
    cal = replace(CAL, grace_host_scale=1.5)
    assert for_host(cal, system("b200")) is cal
    grace = for_host(cal, system("gb200"))
    assert (grace.host_block_s, grace.host_moe_s) == pytest.approx((1.5e-3, 6e-3))
    assert layer_host_s(QWEN, ParallelConfig(dp=8, ep=8), grace) == pytest.approx(9e-3)
    # Qwen3-30B-A3B at one sequence a micro-batch: host-bound on either host, so the step
    # grows with the host's seconds on Grace only
    cfg = ParallelConfig(dp=8, ep=8, num_microbatches=64, moe_dispatcher="flex")
    m = QWEN.with_seq(4096)
    for name, grows in (("gb200", True), ("b200", False)):
        one = estimate(m, cfg, system(name), cal=replace(DEFAULT, grace_host_scale=1.0))
        two = estimate(m, cfg, system(name), cal=replace(DEFAULT, grace_host_scale=2.0))
        assert (two.step_time_s > 1.2 * one.step_time_s) == grows, name
        assert two.breakdown["host"] >= one.breakdown["host"]


def test_shipped_grace_host_scale_is_stage_5s_argmin():
    """benchmarks/fit.py stage 5 prints render.bridge_fit.fit_grace(): the shipped scale must
    be its first line (seven points on the calibration rows, each placed once)."""
    from ledger.render.bridge_fit import fit_grace

    assert fit_grace()[0][2] == DEFAULT.grace_host_scale


def test_a_row_pins_the_host_fit_when_leaving_it_out_moves_the_argmin():
    """benchmarks/host_landscape.py: pinning_rows on landscapes written by hand - three
    rows, two points."""
    from ledger.render.bridge_fit import pinning_rows

    ids = ("a", "b", "c")
    # c alone holds the first point (0.20 against 0.40); without it the second wins (0.10)
    errs = {(1,): [0.10, 0.10, 0.00], (2,): [0.05, 0.05, 0.30]}
    assert pinning_rows(ids, errs) == ((1,), [("c", (2,))])
    # the second point wins (0.15 against 0.20); leaving out a or b (0.10 against 0.15)
    # brings back the first, leaving out c does not
    errs = {(1,): [0.10, 0.10, 0.00], (2,): [0.00, 0.00, 0.15]}
    assert pinning_rows(ids, errs) == ((2,), [("a", (1,)), ("b", (1,))])
    assert pinning_rows(("a",), {(1,): [0.0]}) == ((1,), [])


def test_per_expert_launches_and_the_fused_grouped_mlp():
    # Qwen3-30B-A3B at EP 8: 128 / 8 = 16 routed experts a GPU holds, every layer MoE. Each
    # expert's GEMMs are cuBLASLt calls the host issues one by one (TE GroupedLinear), so a
    # layer's host is block 1 + router 1 + rest 4 + 16 x 0.25 = 10 ms; under the fused
    # grouped MLP (cuDNN's CuTe DSL grouped kernels: one launch for every expert) on an
    # sm_10x GPU in MXFP8 the 4 ms of per-expert launches go: 6 ms
    from ledger.step.host import launched_s, local_experts

    cal = replace(CAL, host_expert_s=2.5e-4)
    b300, h100 = system("b300").gpu, system("h100-sxm").gpu
    mx = ParallelConfig(dp=8, ep=8, precision="fp8-mxfp8")
    fused = replace(mx, fused_grouped_mlp=True)
    assert local_experts(QWEN, mx, b300) == pytest.approx(16)
    assert local_experts(QWEN, fused, b300) == pytest.approx(0)
    assert layer_host_s(QWEN, mx, cal, b300) == pytest.approx(10e-3)
    assert layer_host_s(QWEN, fused, cal, b300) == pytest.approx(6e-3)
    assert sum(launched_s(QWEN, fused, cal, b300)) == pytest.approx(6e-3)
    # where TE keeps GroupedLinear's per-expert loop the experts stay priced: Hopper, FP8
    # current scaling, or no GPU named
    assert layer_host_s(QWEN, fused, cal, h100) == pytest.approx(10e-3)
    assert layer_host_s(QWEN, replace(fused, precision="fp8-tensorwise"), cal, b300) == \
        pytest.approx(10e-3)
    assert layer_host_s(QWEN, fused, cal) == pytest.approx(10e-3)


def test_the_fit_names_an_argmin_on_its_grids_edge():
    """benchmarks/fit.py stage 3 says whether its argmin is bracketed: an axis whose value
    is the grid's top (or a bottom above 0 s) is named; a 0 s floor is not."""
    from ledger.render.bridge_fit import HOST_AXES, HOST_GRID, edge_limited

    # the block axis reaches past the 5 ms, the MoE axis below the 2 ms, of the last edges
    assert HOST_GRID[0][-1] == 7e-3 and HOST_GRID[2][0] == 1e-3
    assert edge_limited((5e-3, 0.0, 2e-3, 3e-4, 4.5e-3)) == []
    assert edge_limited((7e-3, 0.0, 8e-3, 1e-4, 0.0)) == [
        "host_block_s", "host_moe_s", "host_expert_s"]
    assert len(HOST_AXES) == len(HOST_GRID)
