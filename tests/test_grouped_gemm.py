"""The routed experts' grouped GEMMs at their own share of the dense rate
(``ledger.step.Calibration.grouped_gemm_share``, fitted by benchmarks/fit.py stage 4):
it divides the routed experts' GEMM seconds and nothing else - a dense layer, the
attention projections, the shared expert and the router keep the dense rate."""
from dataclasses import replace

import pytest

from ledger.model import llama3_8b, preset
from ledger.parallel import ParallelConfig
from ledger.step import DEFAULT
from ledger.step.gemm import kind_gemms_s, layer_gemms_s
from ledger.system import system


def test_the_grouped_share_divides_the_routed_experts_gemms_only():
    model = preset("deepseek-v3")
    gpu = system("b200").gpu
    cfg = ParallelConfig(tp=1, pp=1, dp=8, ep=8, framework="megatron")
    tokens = 4096.0
    one, half = (replace(DEFAULT, grouped_gemm_share=g) for g in (1.0, 0.5))
    moe = next(k for k in model.kind_counts if k.mlp == "moe")
    at_one = kind_gemms_s(model, moe, cfg, tokens, gpu, one)
    at_half = kind_gemms_s(model, moe, cfg, tokens, gpu, half)
    assert at_half["experts"] == pytest.approx(2 * at_one["experts"])
    for part in at_one:
        if part != "experts":
            assert at_half[part] == pytest.approx(at_one[part]), part


def test_a_dense_model_does_not_see_it():
    model, gpu = llama3_8b(), system("b200").gpu
    cfg = ParallelConfig(tp=1, pp=1, dp=8, framework="megatron")
    one, half = (replace(DEFAULT, grouped_gemm_share=g) for g in (1.0, 0.5))
    assert layer_gemms_s(model, cfg, 8192.0, gpu, half) == pytest.approx(
        layer_gemms_s(model, cfg, 8192.0, gpu, one))


def test_only_the_frameworks_it_was_fitted_on_take_it():
    """Megatron-Core (TE's GroupedLinear: the Megatron-Bridge rows it was fitted on) takes
    the fitted share; DeepSeek's DeepGEMM runs its grouped kernels at its dense rate and the
    frameworks with no figure keep the dense rate."""
    model = preset("deepseek-v3")
    gpu = system("b200").gpu
    full, half = (replace(DEFAULT, grouped_gemm_share=g) for g in (1.0, 0.5))
    moe = next(k for k in model.kind_counts if k.mlp == "moe")
    for fw, ratio in (("megatron", 2.0), ("deepseek", 1.0), ("torchtitan", 1.0)):
        cfg = ParallelConfig(tp=1, pp=1, dp=8, ep=8, framework=fw)
        one = kind_gemms_s(model, moe, cfg, 4096.0, gpu, full)["experts"]
        assert kind_gemms_s(model, moe, cfg, 4096.0, gpu, half)["experts"] == pytest.approx(
            ratio * one), fw
