"""NVFP4's quantization passes beyond one (ledger.step.quantize), counted by hand."""
from dataclasses import replace

import pytest

from ledger.model import preset
from ledger.parallel import ParallelConfig
from ledger.step import estimate
from ledger.step.quantize import nvfp4_pass_bytes
from ledger.system import system


def _cfg(**kw):
    return ParallelConfig(**{"tp": 2, "pp": 4, "dp": 8, "vp": 5, "micro_batch": 1,
                             "num_microbatches": 32, "zero_stage": 1,
                             "sequence_parallel": True, "precision": "fp4-nvfp4", **kw})


def test_nvfp4_reads_counted_by_hand():
    # Llama 3 70B, one 8,192-token micro-batch at TP 2 with SP. Forward, what the rank
    # quantizes: QKV's input (its 4,096-row shard, before the all-gather, once for q, k and
    # v), o_proj's (8,192 x 8,192 / 2), fc1's shard (once for gate and up), fc2's (8,192 x
    # 28,672 / 2). Backward, the output gradients: q, k, v (8,192 x (8,192 + 2 x 1,024) / 2),
    # o_proj's shard (4,096 x 8,192), gate and up (8,192 x 2 x 28,672 / 2), fc2's shard.
    # Each read twice more than MXFP8's one pass, at 2 bytes.
    model, t = preset("llama3-70b"), 8192
    fwd, bwd = nvfp4_pass_bytes(model, _cfg(), t)
    f_el = 4096 * 8192 + t * 4096 + 4096 * 8192 + t * 14336
    b_el = t * 5120 + 4096 * 8192 + t * 28672 + 4096 * 8192
    assert (fwd, bwd) == (f_el * 2 * 2, b_el * 2 * 2)
    # without SP each gathered side counts every token
    fwd1, _ = nvfp4_pass_bytes(model, _cfg(sequence_parallel=False), t)
    assert fwd1 == (t * 8192 * 2 + t * 4096 + t * 14336) * 4
    # the recipe's BF16 layers quantize nothing: 8 of 80 kept BF16 leave 72 / 80
    ends = nvfp4_pass_bytes(model, _cfg(precision="fp4-nvfp4+bf16-ends-0-8"), t)
    assert ends == pytest.approx((fwd * 72 / 80, bwd * 72 / 80))
    # MXFP8's one fused pass is the fitted elementwise term's: nothing beyond it
    assert nvfp4_pass_bytes(model, _cfg(precision="fp8-mxfp8"), t) == (0.0, 0.0)


def test_nvfp4_reads_priced_at_hbm_bandwidth():
    model, cfg, gb200 = replace(preset("llama3-70b"), seq_len=8192), _cfg(), system("gb200")
    est = estimate(model, cfg, gb200, precision="fp4-nvfp4", optimizer="adam")
    fwd, bwd = nvfp4_pass_bytes(model, cfg, 8192)
    # the elementwise term carries them once per layer and micro-batch on this stage
    # (80 / 4 layers, 32 micro-batches): checked against the same run without them
    import ledger.step.layer_time as lt
    saved = lt.nvfp4_pass_bytes
    try:
        lt.nvfp4_pass_bytes = lambda *a: (0.0, 0.0)
        base = estimate(model, cfg, gb200, precision="fp4-nvfp4", optimizer="adam")
    finally:
        lt.nvfp4_pass_bytes = saved
    extra = est.breakdown["elementwise"] - base.breakdown["elementwise"]
    assert extra == pytest.approx(20 * 32 * (fwd + bwd) / gb200.gpu.hbm_bytes_per_s)


def test_current_scaling_amax_reads_counted_by_hand():
    # TE Float8CurrentScaling reads each BF16 tensor once for its amax before the cast
    # (quantizer.cpp L501-539 @ TransformerEngine v2.7), except where a TE norm computed
    # it (LayerNorm*Linear: QKV, fc1). Llama 3 70B, one 8,192-token micro-batch at TP 2
    # with SP. Forward: o_proj's input (8,192 x 8,192 / 2) and fc2's (8,192 x 28,672 / 2);
    # QKV's and fc1's inputs come from their norms. Backward: every output gradient, as
    # NVFP4's above. One read each, at 2 bytes.
    from ledger.step.quantize import amax_pass_bytes

    model, t = preset("llama3-70b"), 8192
    fwd, bwd = amax_pass_bytes(model, _cfg(precision="fp8-tensorwise"), t)
    f_el = t * 4096 + t * 14336
    b_el = t * 5120 + 4096 * 8192 + t * 28672 + 4096 * 8192
    assert (fwd, bwd) == (f_el * 2, b_el * 2)
    # Qwen3-30B-A3B at EP 8, TP 1: the routed experts' inputs and gradients are the rank's
    # 4,096 x 8 routed rows, quantized expert by expert (split_quantize), fc1 2,048 wide in,
    # 2 x 768 out; fc2 768 in, 2,048 out; o_proj 32 x 128 = 4,096 in; QKV out 4,096 + 2 x
    # 4 x 128; the router stays BF16
    q, t = preset("qwen3-30b-a3b"), 4096
    cfg = _cfg(tp=1, pp=1, dp=8, vp=1, ep=8, sequence_parallel=False,
               precision="fp8-tensorwise")
    fwd, bwd = amax_pass_bytes(q, cfg, t)
    rows = t * 8
    assert fwd == (t * 4096 + rows * 2048 + rows * 768) * 2
    assert bwd == (t * 5120 + t * 2048 + rows * 1536 + rows * 2048) * 2
    # none for MXFP8: its cast reads each tensor once
    assert amax_pass_bytes(model, _cfg(precision="fp8-mxfp8"), 8192) == (0.0, 0.0)
