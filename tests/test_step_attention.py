"""The fused attention core at cuDNN's measured rate (ledger.system.attention) and the loss's
passes over the logits (ledger.frameworks.losses.VOCAB_PARALLEL_PASSES), by hand."""
from dataclasses import replace

import pytest

from ledger.frameworks.losses import LOSSES
from ledger.model import llama3_8b
from ledger.parallel import ParallelConfig
from ledger.step import DEFAULT, estimate, gemm_s
from ledger.step.layer_time import layer_times
from ledger.system import system
from ledger.system.attention import shares, window_shares


def _layer(gpu, model=None, **kw):
    model = model or llama3_8b()
    cfg = ParallelConfig(**{"tp": 1, "pp": 1, "dp": 8, "micro_batch": 2,
                            "num_microbatches": 8, "zero_stage": 1, **kw})
    links = {a: "nvlink" for a in ("tp", "cp", "ep", "pp")}
    return model, layer_times(model, cfg, system(gpu), links, DEFAULT)


def test_measured_points_as_the_csvs_give_them():
    # cudnn-frontend results/{gb200,gb300,h200}_919_only_cudnn/llama3.1_*.csv, top_left
    # bfloat16, s = 8192: 1598 / 1311, 1887 / 1385, 644 / 541 TFLOP/s (forward / backward)
    assert [round(x * 2500, 6) for x in shares("gb200", 8192)] == [1598, 1311]
    assert [round(x * 2500, 6) for x in shares("gb300", 8192)] == [1887, 1385]
    assert [round(x * 989, 6) for x in shares("h100-sxm", 8192)] == [644, 541]
    # and their fp8 rows (cuDNN's FP8 attention, --fp8-dot-product-attention)
    assert [round(x * 2500, 6) for x in shares("gb200", 8192, fp8=True)] == [1987, 1478]
    assert [round(x * 2500, 6) for x in shares("gb300", 8192, fp8=True)] == [2780, 1590]
    assert [round(x * 989, 6) for x in shares("h200", 8192, fp8=True)] == [964, 430]
    # log-linear between the measured lengths, the end points' beyond them
    mid = shares("gb200", 8192 * 2**0.5)[0] * 2500
    assert mid == pytest.approx((1598 + 1687) / 2)
    assert shares("gb200", 512)[0] * 2500 == pytest.approx(1042)
    assert shares("a100-80gb", 8192) is None and shares("mi300x", 8192) is None


def test_llama3_8b_core_at_the_measured_rate_by_hand():
    # 32 heads x 2 sequences x 8192 queries x 8192 keys, causal (half), QK^T and PV at
    # head dim 128: 2 q k (128 + 128) FLOPs a head
    model, lt = _layer("gb200")
    flops = 32 * 0.5 * 2 * 16384 * 8192 * 256
    assert lt.attention == pytest.approx(flops / 1598e12)
    assert lt.attention_bwd == pytest.approx(2.5 * flops / 1311e12)
    # B200 takes GB200's measured share at its own peak; GB300 its own measurement
    _, b200 = _layer("b200")
    assert b200.attention == pytest.approx(flops / (2250e12 * 1598 / 2500))
    _, gb300 = _layer("gb300")
    assert lt.attention / gb300.attention == pytest.approx(1887 / 1598)


def _gpt_oss(seq=4096):
    from pathlib import Path

    from ledger.io import from_hf_config

    m = from_hf_config(Path(__file__).parent.parent / "examples" / "gpt-oss-120b.json")
    return m.with_seq(seq)


def test_window_kernel_points_as_the_gpt_oss_csvs_give_them():
    # cudnn-frontend results/gpt_oss/{gb200,gb300}/gpt_oss_20260424_*.csv @ fb682ce7,
    # bfloat16 top_left, window 128, non-deterministic backward, s = 4096: 161 / 182 and
    # 167 / 191 TFLOP/s (forward / backward)
    assert [round(x * 2500, 6) for x in window_shares("gb200", 4096, 128)] == [161, 182]
    assert [round(x * 2500, 6) for x in window_shares("gb300", 4096, 128)] == [167, 191]
    assert [round(x * 2250, 6) for x in window_shares("b200", 8192, 128)] == [
        pytest.approx(165 * 2250 / 2500), pytest.approx(187 * 2250 / 2500)]
    # no window measurement on Hopper (its gpt_oss CSV is at window 1024), none wider
    assert window_shares("h100-sxm", 4096, 128) is None
    assert window_shares("gb200", 4096, 4096) is None
    assert window_shares("gb200", 4096, None) is None


# the head-dim-64 CSVs (cudnn-frontend results/{gb200,h200}_919_only_cudnn/gpt_oss_*.csv @
# df73764a): batch 2 x 64 heads, a 1,024-key window - at 4096 keys 1024 x 1025 / 2 + 3072 x
# 1024 scores a head, 2 (64 + 64) FLOPs each forward
D64_FWD = 2 * 64 * (1024 * 1025 // 2 + 3072 * 1024) * 256


def test_head_dim_64_points_as_the_gpt_oss_csvs_give_them():
    # bfloat16 rows at 4096 keys: GB200 0.209 / 0.487 ms, H200 0.358 / 1.042 ms (forward /
    # backward); TFLOP/s over the benchmark's own FLOP count
    assert [x * 2500e12 for x in shares("gb200", 4096, head_dim=64)] == [
        pytest.approx(D64_FWD / 0.209e-3), pytest.approx(2.5 * D64_FWD / 0.487e-3)]
    assert [x * 989e12 for x in shares("h100-sxm", 4096, head_dim=64)] == [
        pytest.approx(D64_FWD / 0.358e-3), pytest.approx(2.5 * D64_FWD / 1.042e-3)]
    # fp8 (GB200 0.203 / 0.862 ms): the backward's time is the causal prefix's
    causal = 2 * 64 * (4096 * 4097 // 2) * 256
    assert [x * 2500e12 for x in shares("gb200", 4096, fp8=True, head_dim=64)] == [
        pytest.approx(D64_FWD / 0.203e-3), pytest.approx(2.5 * causal / 0.862e-3)]
    # a narrower core runs at well under the head-dim-128 kernel's rate on Blackwell
    f64, b64 = shares("gb300", 4096, head_dim=64)
    f128, b128 = shares("gb300", 4096, head_dim=128)
    assert 0.35 < f64 / f128 < 0.45 and 0.45 < b64 / b128 < 0.6
    # wider heads keep the head-dim-128 rows
    assert shares("gb200", 4096, head_dim=128) == shares("gb200", 4096)


def test_hopper_fp8_attention_off_head_dim_128_takes_the_bf16_kernel():
    # TE trains FP8 attention on sm_90 at d = 128 only (fused_attn.cpp L258-270 @ 4220403e;
    # the H200 CSVs' fp8 rows fail at head dim 64): the BF16 kernel's rate there
    bf16 = shares("h200", 4096, head_dim=64)
    assert shares("h200", 4096, fp8=True, head_dim=64) == bf16
    assert shares("h100-sxm", 4096, fp8=True, head_dim=192) == shares("h100-sxm", 4096)
    assert shares("h200", 4096, fp8=True, head_dim=128) == shares("h200", 4096, fp8=True)
    assert shares("h200", 4096, fp8=True, head_dim=128) != shares("h200", 4096)
    # Blackwell trains FP8 at head dim 64 (the gb200 / gb300 CSVs' fp8 rows)
    assert shares("gb200", 4096, fp8=True, head_dim=64) != shares("gb200", 4096, head_dim=64)


def test_gpt_oss_window_layers_take_the_measured_kernel_s_time():
    """gpt-oss on GB200 at MBS 4 x 4096: its 18 global layers at the head-dim-64 causal
    kernel's rate (the gpt_oss CSV at window 1024: 0.209 / 0.487 ms for D64_FWD FLOPs), its
    18 windowed layers at the time cuDNN's window kernel takes for the same 256 (batch x
    head) rows of 4096 queries - 0.210 ms forward, 0.465 ms backward (the gpt_oss CSV's
    time_ms at batch 2 x 128 heads). Before, the window's FLOPs ran at the causal kernel's
    rate: 0.025 ms forward."""
    m = _gpt_oss()
    assert (m.layers, m.sliding_window, m.heads, m.head_dim) == (36, 128, 64, 64)
    _, lt = _layer("gb200", model=m, micro_batch=4, ep=8)
    full = 64 * 4 * 4096 * 4096 / 2 * 2 * 128  # heads x batch x causal scores x 2 (d + dv)
    fwd = (18 * full * 0.209e-3 / D64_FWD + 18 * 0.210e-3) / 36
    bwd = (18 * full * 0.487e-3 / D64_FWD + 18 * 0.465e-3) / 36
    assert lt.attention == pytest.approx(fwd, rel=0.02)
    assert lt.attention_bwd == pytest.approx(bwd, rel=0.02)
    # Hopper, with no window measurement, keeps the causal rate (head dim 64's, H200's CSV:
    # 0.358 ms forward) for the window's FLOPs
    _, h = _layer("h100-sxm", model=m, micro_batch=4, ep=8)
    keys = 18 * 4096 / 2 + 18 * (128 - 128 * 128 / (2 * 4096))
    h_fwd = 64 * 4 * 4096 * keys * 2 * 128 / 36 * 0.358e-3 / D64_FWD
    assert h.attention == pytest.approx(h_fwd)


def test_fp8_window_backward_runs_the_causal_prefix():
    """Under FP8 attention (TE's fused FP8 kernel for sinks + window on sm_100+, cuDNN 9.21)
    the gpt_oss CSVs' fp8 rows: the forward keeps to the band (0.195 ms at 4K on GB200, as
    BF16's 0.210), the backward's time grows as s^2 (1.731 ms at 4K, 6.176 ms at 8K, 23.231
    ms at 16K: about 4x a doubling) - it is priced so. The global layers take the head-dim
    64 fp8 rows (0.203 ms forward over the band's FLOPs; 0.862 ms backward, the causal
    prefix's)."""
    assert [round(x * 2500, 6) for x in window_shares("gb200", 4096, 128, fp8=True)] == [
        173, 49]
    m = _gpt_oss()
    _, lt = _layer("gb200", model=m, micro_batch=4, ep=8, precision="fp8-mxfp8",
                   fp8_attention=True)
    full = 64 * 4 * 4096 * 4096 / 2 * 2 * 128
    causal = 2 * 64 * (4096 * 4097 // 2) * 256
    fwd = (18 * full * 0.203e-3 / D64_FWD + 18 * 0.195e-3) / 36
    bwd = (18 * full * 0.862e-3 / causal + 18 * 1.731e-3) / 36
    assert lt.attention == pytest.approx(fwd, rel=0.02)
    assert lt.attention_bwd == pytest.approx(bwd, rel=0.02)
    b, f = (window_shares("gb200", s, 128, fp8=True)[1] for s in (8192, 16384))
    assert b / f == pytest.approx(2, rel=0.1)  # rate over the window's FLOPs halves


def test_without_a_measurement_or_flash_the_gemm_pricing_stays():
    model, lt = _layer("a100-80gb")
    gpu = system("a100-80gb").gpu
    per_head = gemm_s(16384, 8192, 128, gpu, DEFAULT) + gemm_s(16384, 128, 8192, gpu, DEFAULT)
    assert lt.attention == pytest.approx(32 * 0.5 * per_head)
    assert lt.attention_bwd == pytest.approx(2 * lt.attention)
    _, unfused = _layer("gb200", flash_attention=False)
    gb = system("gb200").gpu
    assert unfused.attention == pytest.approx(32 * (
        gemm_s(16384, 8192, 128, gb, DEFAULT) + gemm_s(16384, 128, 8192, gb, DEFAULT)))


def test_vocab_parallel_passes_counted_by_hand():
    # bf16 logits: read 2, fp32 copy 4, max 4, -= 8, exp 8, sum 4, /= 8; backward *= 8,
    # the cast back 4 + 2
    assert LOSSES["vocab-parallel"].traffic_bytes(2) == (38.0, 14.0)
    assert LOSSES["vocab-parallel"].traffic_bytes(4) == (40.0, 8.0)
    # TE's parallel loss (te-parallel, as the Bridge rows run it): read, read + write the
    # gradient over the logit; backward scaled in place
    assert LOSSES["te-parallel"].traffic_bytes(2) == (6.0, 4.0)
    assert LOSSES["eager"].traffic_bytes(2) == (0.0, 0.0)  # not counted yet


def test_the_loss_passes_are_the_step_s_elementwise_time_at_hbm_bandwidth():
    model = llama3_8b()
    cfg = ParallelConfig(tp=2, pp=1, dp=4, micro_batch=2, num_microbatches=8, zero_stage=1)
    h100 = system("h100-sxm")
    with_loss = estimate(model, cfg, h100, optimizer="adam").breakdown["elementwise"]
    without = estimate(model, replace(cfg, loss="none"), h100,
                       optimizer="adam").breakdown["elementwise"]
    logits = 2 * 8192 * model.vocab / 2  # a micro-batch's logits on one TP rank
    assert with_loss - without == pytest.approx(8 * logits * 52 / h100.gpu.hbm_bytes_per_s)


def test_the_planner_prices_window_layers_on_its_grid():
    """The planner's grid (arrays of CP and DP) through the window kernel's pricing: CP > 1
    keeps the causal rate (a ring's chunks are no band), CP 1 takes the window kernel's -
    its #1 at CP 1 is estimate's own figure for that placement."""
    from ledger.plan import plan

    m = _gpt_oss()
    gb200 = system("gb200")
    result = plan(m, 16, gb200, 64, top=40)
    assert result.plans
    best = next(p for p in result.plans if p.config.cp == 1)
    assert best.step_time_s == pytest.approx(
        estimate(m, best.config, gb200, optimizer="adam").step_time_s, rel=1e-6)
