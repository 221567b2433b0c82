"""What FP8 attention's fused kernel keeps (ledger.frameworks.fp8_attention): Transformer
Engine's FusedAttnFunc at d0067d0d keeps q, k, v in FP8 for its FP8 backward (backends.py
L1445, L1579-1587; one row-wise copy, utils.py L2692-2694: MXFP8 with an E8M0 scale per
32 elements) and the output in BF16 under MXFP8 and current scaling (L210)."""
from dataclasses import replace

import pytest

from ledger.model import preset
from ledger.parallel import ParallelConfig
from ledger.placement import activation_bytes_per_layer
from ledger.step import estimate
from ledger.system import system


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1,
                             "num_microbatches": 4, "zero_stage": 1, **kw})


def _saved(cfg):
    return activation_bytes_per_layer(replace(preset("llama3-8b"), seq_len=4096), cfg)


@pytest.mark.parametrize("precision,per_element", [("fp8-mxfp8", 1 + 1 / 32),
                                                   ("fp8-tensorwise", 1.0),
                                                   ("fp8-delayed", 1.0)])
def test_q_k_v_kept_in_fp8_by_hand(precision, per_element):
    # Llama 3 8B, 4,096 tokens: q at 32 heads, k and v at 8 (GQA-native) of 128, BF16 before
    off, on = (_saved(_cfg(precision=precision, fp8_attention=f)) for f in (False, True))
    assert off - on == pytest.approx(4096 * (32 * 128 + 8 * 256) * (2 - per_element))


def test_where_it_does_not_run_nothing_moves():
    # Float8BlockScaling takes no fp8_dpa (fp8_utils.py L777-788 @d98e8a64); BF16 none
    for precision in ("fp8-blockwise", None):
        assert _saved(_cfg(precision=precision, fp8_attention=True)) == \
            _saved(_cfg(precision=precision))


def test_memory_moves_and_the_step_does_not():
    # the elementwise term stays on the BF16 q, k, v the kernels write (the cast beside
    # them is not priced): FP8 attention's time is its core's rate alone
    m, b200 = replace(preset("llama3-8b"), seq_len=4096), system("b200")
    cfg = _cfg(precision="fp8-mxfp8")
    a = estimate(m, cfg, b200, precision="fp8-mxfp8", optimizer="adam")
    b = estimate(m, replace(cfg, fp8_attention=True), b200, precision="fp8-mxfp8",
                 optimizer="adam")
    assert b.memory_per_gpu_bytes < a.memory_per_gpu_bytes
    assert b.breakdown["elementwise"] == a.breakdown["elementwise"]


def test_no_bridge_row_names_it_unpriced():
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    on = 0
    for r in rows():
        if True not in (r.setting("fp8_dot_product_attention"),
                        r.precision_setting("fp8_dot_product_attention")):
            continue
        r = r.as_run()
        prec, _ = precision_of(r)
        cfg, approx = config_of(r, prec, model_of(r))
        on += cfg.fp8_attention
        assert not any("FP8 attention" in a for a in approx), r.id
    assert on >= 10
