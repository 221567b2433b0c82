"""NVIDIA's Megatron Core MoE report as prediction rows (ledger.validation.mcore_moe,
ledger.render.mcore_moe): DeepSeek-V3 and Qwen3-235B on GB300 / GB200 / H100.

Golden figures copied from "Scalable Training of Mixture-of-Experts Models with Megatron
Core", arXiv 2603.07685v2, as extracted in AICO-Ascend/AICO-Knowledge @
14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8, extraction/fulltext/scalable-training-of-mixture-
of-experts-models-with-megatron-core.txt: Table 11 (p.69), Table 20 and Appendix B.2
(p.87), Table 17 (p.74) and the pipeline layouts of sec. 9.2.2 (p.74-75)."""
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.arch.flops import model_flops_per_token
from ledger.io import parse_layout
from ledger.render import mcore_moe as render
from ledger.render.bridge import config_of, model_of, outcome, precision_of
from ledger.validation import mcore_moe

ZOO = Path(__file__).parent / "fixtures" / "modelzoo"

# Table 11 (p.69): model, system, #GPUs, seqlen, dtype, per-GPU TF, tokens/s/GPU
TABLE_11 = [("deepseek-v3", "gb300", 256, 4096, "MXFP8", 1233, 4730),
            ("deepseek-v3", "gb200", 256, 4096, "MXFP8", 1048, 4020),
            ("deepseek-v3", "gb200", 256, 4096, "BF16", 857, 3298),
            ("deepseek-v3", "h100", 1024, 4096, "FP8-BLK", 368, 1412),
            ("qwen3-235b-a22b", "gb300", 256, 4096, "MXFP8", 974, 6583),
            ("qwen3-235b-a22b", "gb200", 256, 4096, "MXFP8", 919, 6212),
            ("qwen3-235b-a22b", "gb200", 256, 4096, "BF16", 750, 5100),
            ("qwen3-235b-a22b", "h100", 256, 4096, "BF16", 320, 2132),
            ("qwen3-235b-a22b", "gb300", 128, 131072, "MXFP8", 1150, 1556)]
# Table 20 (p.87), "TP1 PP4 CP1 EP64 VPP4 MBS1 GBS8192" ... in Table 11's order
TABLE_20 = [(1, 4, 1, 64, 4, 1, 8192), (1, 4, 1, 64, 4, 1, 8192), (1, 8, 1, 32, 4, 1, 4096),
            (2, 4, 1, 64, 4, 1, 8192), (1, 4, 1, 64, 6, 2, 3072), (1, 4, 1, 64, 6, 3, 3072),
            (1, 4, 1, 32, 12, 1, 8192), (2, 8, 1, 32, 4, 1, 2048), (4, 4, 4, 32, 12, 1, 1024)]
# Appendix B.2 (p.87) per row: dispatcher, recompute, 1F1B overlap, CUDA graphs
GRAPHS = ("attn", "moe_router", "moe_preprocess")
B2 = [("hybridep", None, True, GRAPHS), ("hybridep", ("mlp",), False, GRAPHS),
      ("hybridep", ("mlp",), False, GRAPHS), ("deepep", ("mla_up_proj", "mlp"), True, ()),
      ("hybridep", None, False, GRAPHS), ("hybridep", ("moe_act", "layernorm"), True, GRAPHS),
      ("hybridep", ("moe_act", "layernorm"), True, GRAPHS),
      ("deepep", ("moe_act", "layernorm"), True, GRAPHS), ("hybridep", None, False, GRAPHS)]
GB200_LAYOUT = "Et*4|(tttt|)*14tmL"  # sec. 9.2.2, p.75 (16 stages: PP4 x VPP4)


@pytest.fixture(scope="module")
def outs():
    return render.outcomes()


def _cfg(r):
    model = model_of(r)
    prec, approx = precision_of(r)
    cfg, approx2 = config_of(r, prec, model)
    return model, prec, cfg, approx + approx2


def test_rows_hold_table_11_and_table_20_as_printed():
    rows = mcore_moe.rows()
    assert [(r.model, r.gpu, r.gpus, r.seq_len, r.precision_published,
             r.model_tflops_per_gpu, r.tokens_per_s_per_gpu) for r in rows] == TABLE_11
    assert [(r.tp, r.pp, r.cp, r.ep, r.vp, r.mbs, r.gbs) for r in rows] == TABLE_20
    assert mcore_moe.SOURCE["commit"] == "14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8"
    for r in rows:
        assert r.role == "prediction" and r.etp == 1  # Parallel Folding (Table 17's note)
        assert r.source["table"] == 11 and r.source["page"] == 69
        assert r.micro_batch * r.dp * r.num_microbatches == r.gbs  # GBS splits evenly
        assert r.as_run() == r  # no Bridge cell rule moves these rows


def test_appendix_b2_reaches_the_priced_config():
    """Each row's ParallelConfig carries B.2's dispatcher, recompute modules, 1F1B
    overlap and CUDA-graph scopes, and nothing of the run is left unpriced."""
    for r, (backend, recompute, overlap, graphs) in zip(mcore_moe.rows(), B2):
        _, _, cfg, approx = _cfg(r)
        assert approx == (), r.id
        assert (cfg.moe_dispatcher, cfg.ep_backend) == ("flex", backend), r.id
        assert cfg.recompute_modules == recompute, r.id
        assert cfg.recompute == ("selective" if recompute else "none"), r.id
        assert bool(cfg.ep_overlap) is overlap and cfg.delay_wgrad is overlap, r.id
        assert cfg.cuda_graph == graphs, r.id
        assert cfg.ep_sms == (32 if backend == "hybridep" else None), r.id


def test_the_papers_conflicts_are_settled_by_table_20():
    """DeepSeek-V3 on H100: Table 17 says PP 8 and recomputes four modules, Table 20 and
    B.2 say PP 4 and two; the row runs Table 20's (DP 128), and sec. 9.2.2's 32-stage
    H100 layout gives way to the 16-stage one - the string sec. 9.2.2 prints for GB200."""
    rows = {(r.model, r.gpu, r.precision): r for r in mcore_moe.rows()}
    h100, gb200 = rows["deepseek-v3", "h100", "fp8_sc"], rows["deepseek-v3", "gb200", "fp8_mx"]
    assert (h100.pp, h100.dp, h100.num_microbatches) == (4, 128, 64)
    assert any("Table 17's pp 8" in n for n in h100.notes)
    model = model_of(h100)
    assert gb200.layout(model.mtp_layers)[0] == GB200_LAYOUT
    assert h100.layout(model.mtp_layers) == ("Et*4|(t*4|)*14tmL", "Megatron-Bridge's layout map")
    assert parse_layout(GB200_LAYOUT, 4, 61, 1) == parse_layout("Et*4|(t*4|)*14tmL", 4, 61, 1)
    assert _cfg(h100)[2].stage_layers == _cfg(gb200)[2].stage_layers == (4,) * 15 + (1,)
    # Table 18: FP8 primary weights on both
    assert precision_of(h100)[0] == "fp8-blockwise+param-gather"
    assert precision_of(gb200)[0] == "fp8-mxfp8+param-gather"


def test_every_mxfp8_row_runs_megatron_bridges_mxfp8_function():
    """Where the paper is silent (every MXFP8 row but Table 18's), RULE takes Megatron-Bridge's
    bf16_with_mxfp8_mixed (mixed_precision.py L255-266 @067f987d): FP8 param gather through
    the reused gradient buffer - what the report's launch script sets for MXFP8 (ModelZoo
    sbatch_benchmarking.sh L98-101, the fixture); BF16 rows gather nothing in FP8."""
    script = (ZOO / "sbatch_benchmarking.sh").read_text().splitlines()
    assert script[97] == 'if [[ ${PR} == "mxfp8" ]]; then'
    assert "--fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag" in script[100]
    got = {(r.gpu, r.model, r.precision_published, r.seq_len):
           (precision_of(r)[0], r.precision_setting("reuse_grad_buf_for_mxfp8_param_ag"))
           for r in mcore_moe.rows()}
    mx = [k for k in got if k[2] == "MXFP8"]
    assert len(mx) == 5
    assert all(got[k] == ("fp8-mxfp8+param-gather", True) for k in mx)
    assert {got[k] for k in got if k[2] == "BF16"} == {(None, None)}


def _paper(r) -> float:
    """The FLOPs per token the paper counted: TFLOPS/GPU over tokens/s/GPU (Table 11)."""
    return r.model_tflops_per_gpu * 1e12 / r.tokens_per_s_per_gpu


def test_the_papers_flops_per_token_are_megatrons_count():
    """Table 11's TFLOPS/GPU over its tokens/s/GPU: DeepSeek-V3 260.7 GFLOP a token at
    4,096 (259.9 to 260.7 over its four rows), Qwen3-235B 147.1 to 150.1 at 4,096 and
    739.1 at 131,072. The ledger's count in Megatron-Core's convention (causal attention
    over s/2 keys, the MTP depth in, the router out) is within 1.5% of every row - the
    spread of the paper's own rows of one model - and within 0.3% of its MXFP8 rows (both
    bands set after the comparison was first printed)."""
    for r in mcore_moe.rows():
        meg = mcore_moe.megatron_flops_per_token(model_of(r))
        assert _paper(r) == pytest.approx(meg, rel=0.015), r.id
        if r.precision == "fp8_mx" and r.seq_len == 4096:
            assert _paper(r) == pytest.approx(meg, rel=0.003), r.id
    assert _paper(mcore_moe.rows()[0]) / 1e9 == pytest.approx(260.7, abs=0.05)


def test_which_convention_each_count_uses():
    """What separates the ledger's MFU numerator (ledger.arch.flops.model_flops_per_token,
    estimate's ``model_flops``) from the paper's: not the causal mask - both count s/2
    keys; the non-causal count puts the 131,072-token row over half as high again -, but
    the MTP depth (the ledger leaves it out: DeepSeek-V3 a few percent under the paper)
    and the router (the ledger counts it, 6 h E per MoE layer: Qwen3-235B a fraction of a
    percent over the paper's MXFP8 rows)."""
    rows = {(r.model, r.gpu, r.precision, r.seq_len): r for r in mcore_moe.rows()}
    long = rows["qwen3-235b-a22b", "gb300", "fp8_mx", 131072]
    m = model_of(long)
    assert model_flops_per_token(m, causal=False) > 1.5 * _paper(long)
    assert model_flops_per_token(m) == pytest.approx(_paper(long), rel=0.01)
    ds = rows["deepseek-v3", "gb300", "fp8_mx", 4096]
    m = model_of(ds)
    assert m.mtp_layers == 1
    assert model_flops_per_token(m) < 0.98 * _paper(ds)  # the MTP depth left out
    qw = rows["qwen3-235b-a22b", "gb300", "fp8_mx", 4096]
    m = model_of(qw)
    assert mcore_moe.router_flops_per_token(m) == 6 * 4096 * 128 * 94
    assert _paper(qw) < model_flops_per_token(m) < 1.005 * _paper(qw)  # the router in


def test_every_row_runs_and_every_one_that_ran_is_judged_to_fit(outs):
    """Every row runs, and every one is judged to fit - each of them ran (Table 11)."""
    assert [o.status for o in outs] == ["ran"] * 9
    assert [o.row.id for o in outs if not o.fits] == []


def test_table_5_row_runs_its_offload_and_fits(outs):
    """Table 5 (p.25) reprints Table 11's GB200 Qwen3-235B MXFP8 run (TP1 EP64, 920 ~ 919
    TF/s) "+Offload"; the rule reads sec. 4.1.5's one stated pairing (moe_act recomputed,
    its input offloaded) - a reading chosen with the row's priced peaks in view
    (mcore_moe.OFFLOAD), so Table 5's 175 GB is no evidence for it (memory_mcore: role
    "chosen"). Held here: the run, which ran, is judged to fit with it and not without."""
    key = ("qwen3-235b-a22b", "gb200", "MXFP8", 919)
    assert mcore_moe.OFFLOAD[key]["offload_modules"] == ["moe_act"]
    o = next(o for o in outs if o.row.id == "mcore-2603.07685/gb200/qwen3-235b-a22b/fp8_mx/"
             "256g/seq4096")
    assert o.fits
    s = {k: v for k, v in o.row.recipe["settings"].items()
         if k not in ("fine_grained_activation_offloading", "offload_modules")}
    bare = outcome(replace(o.row, recipe={**o.row.recipe, "settings": s}))
    assert not bare.fits and bare.peak_bytes > bare.capacity_bytes


def test_gb300_is_predicted_faster_than_gb200_as_published(outs):
    """Issue 30's direction: the GB300 rows over the GB200 rows of the same model and
    precision are > 1 as published and as predicted (benchmarks/mcore_moe.py: Qwen3-235B
    MXFP8 4K 1.060 published, 1.036 predicted since GB200 runs B300's measured MXFP8 share,
    ledger.system.gemm_rates - 0.994 before; DeepSeek-V3 1.177 against 1.422)."""
    for name, pub, pred in render.pair_ratios(outs):
        if name.startswith("GB300 / GB200"):
            assert pub > 1 and pred > 1, name


def test_gb300_over_gb200_within_15_percent(outs):
    for name, pub, pred in render.pair_ratios(outs):
        if name.startswith("GB300 / GB200"):
            assert abs(pred / pub - 1) <= 0.15, name


@pytest.mark.xfail(strict=True, reason="measured (benchmarks/mcore_moe.py): mean |error| "
                   "13.4% (FP8 rows 9.0%, BF16 rows 22.4%, all three BF16 rows too slow by "
                   "18-31%)")
def test_moe_mean_error_within_10_percent(outs):
    errs = [abs(o.error) for o in outs]
    assert sum(errs) / len(errs) <= 0.10


@pytest.mark.xfail(strict=True, reason="measured (benchmarks/mcore_moe.py): DeepSeek-V3 "
                   "BF16 on 256 GB200 (PP8 EP32) predicted 2,278 against 3,298 published "
                   "(-30.9%)")
def test_no_row_beyond_25_percent(outs):
    assert all(abs(o.error) <= 0.25 for o in outs)


def test_the_set_aside_reading_runs_apart_from_the_rows():
    """Table 17's reading of the H100 DeepSeek-V3 run (PP 8, DP 64, its four recompute
    modules, sec. 9.2.2's 32-stage layout, which PP 8 x VPP 4 takes) runs and fits; it is
    printed beside the rows, not among them."""
    from ledger.render.bridge import outcome

    alt = mcore_moe.other_reading()
    assert (alt.pp, alt.dp, alt.num_microbatches, alt.tokens_per_s_per_gpu) == (8, 64, 128, 1412)
    model, _, cfg, approx = _cfg(alt)
    assert approx == () and cfg.recompute_modules == ("mlp", "mla_up_proj", "moe_act",
                                                      "layernorm")
    assert alt.layout(model.mtp_layers)[0] == "Et*3|(tt|)*29m|L"
    assert cfg.stage_layers == (3,) + (2,) * 29 + (0, 0)
    o = outcome(alt)
    assert o.status == "ran" and o.fits
    assert alt.id not in {r.id for r in mcore_moe.rows()}
