"""The Megatron Core MoE report's Table 5 (sec. 4.1.5, p.25) as memory validation rows
(ledger.validation.memory_mcore): each run's settings are the ones ledger.render.bridge
gives the Table 11 run the rule names, with only what Table 5 names changed.

Golden figures copied from "Scalable Training of Mixture-of-Experts Models with Megatron
Core", arXiv 2603.07685v2, as extracted in AICO-Ascend/AICO-Knowledge @
14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8, extraction/fulltext/scalable-training-of-mixture-
of-experts-models-with-megatron-core.txt, Table 5 (p.25): DeepSeek-V3 full TP1PP8EP32VPP4
MXFP8 169 GB -> 151 GB with offload; Qwen3-235B TP2 EP16 172 GB -> TP1 EP64 with offload
175 GB, each GB read as 2^30 B (mcore_moe.GB). Tolerance: issue 31's bar for a measured
row, |error| <= 10%. The Qwen3 offload row's modules were read with its priced peaks in
view (mcore_moe.OFFLOAD): role "chosen", held to no bar."""
from dataclasses import replace

import pytest

from ledger.render.bridge import config_of, model_of, precision_of
from ledger.system import system
from ledger.validation import mcore_moe
from ledger.validation.memory import _placed, error, peaks, predicted
from ledger.validation.memory_mcore import MCORE, qwen3_235b_a22b, table5

ROWS = {r.label: r for r in table5()}
TABLE_11 = {(r.model, r.gpu, r.precision_published): r for r in mcore_moe.rows()}


def _bridge(row):
    row = row.as_run()
    model = model_of(row)
    return model, config_of(row, precision_of(row)[0], model)[0]


def _table5_runs():
    """Table 5's runs as Table 11's rows with Table 5's changes (the module's rule)."""
    bf16 = TABLE_11[("deepseek-v3", "gb200", "BF16")]
    ds = replace(bf16, precision="fp8_mx", precision_published="MXFP8",
                 recipe={**bf16.recipe,
                         "precision": {"settings": mcore_moe.precision_settings("MXFP8")}})
    q = TABLE_11[("qwen3-235b-a22b", "gb200", "MXFP8")]
    base = {k: v for k, v in q.recipe["settings"].items()
            if k not in ("fine_grained_activation_offloading", "offload_modules")}
    q16 = replace(q, tp=2, ep=16, recipe={**q.recipe, "settings": base})
    return {"DeepSeek-V3 TP1 PP8 EP32 VPP4 MXFP8 (T5)": ds,
            "DeepSeek-V3 T5 +offload: modules unstated": ds,
            "Qwen3-235B TP2 EP16 MXFP8 (T5)": q16,
            "Qwen3-235B TP1 EP64 MXFP8 +offload moe_act": q}


@pytest.mark.parametrize("label", list(ROWS))
def test_each_row_is_the_rules_table_11_run(label):
    model, cfg = _bridge(_table5_runs()[label])
    # seq_default only labels a report ("default; --seq to set"): the reader sets it and
    # render.bridge's replace(seq_len=...) keeps it; Table 11 states 4,096 tokens
    assert ROWS[label].model == replace(model, seq_default=False) and ROWS[label].cfg == cfg


def test_the_published_figures():
    got = {r.label: (r.metric, r.measured) for r in table5()}
    assert got == {"DeepSeek-V3 TP1 PP8 EP32 VPP4 MXFP8 (T5)": ("max-alloc", 169 * 2**30),
                   "DeepSeek-V3 T5 +offload: modules unstated": ("outcome", 1.0),
                   "Qwen3-235B TP2 EP16 MXFP8 (T5)": ("max-alloc", 172 * 2**30),
                   "Qwen3-235B TP1 EP64 MXFP8 +offload moe_act": ("max-alloc", 175 * 2**30)}
    assert all(r.gpu == "gb200" for r in table5())
    assert {r.label: r.role for r in table5()} == {
        "DeepSeek-V3 TP1 PP8 EP32 VPP4 MXFP8 (T5)": "prediction",
        "DeepSeek-V3 T5 +offload: modules unstated": "prediction",
        "Qwen3-235B TP2 EP16 MXFP8 (T5)": "prediction",
        "Qwen3-235B TP1 EP64 MXFP8 +offload moe_act": "chosen"}
    assert sum(r.source == MCORE for r in peaks()) == 4
    assert qwen3_235b_a22b().params == pytest.approx(235e9, rel=0.01)


def test_max_alloc_is_the_worst_ranks_allocation():
    row = ROWS["Qwen3-235B TP2 EP16 MXFP8 (T5)"]
    ranks = _placed(row).memory_by_rank
    assert predicted(row) == max(m.allocated_bytes for m in ranks) > ranks[-1].allocated_bytes


@pytest.mark.parametrize("label", list(ROWS))
def test_every_run_fits_on_gb200(label):
    """Every Table 5 run ran: the verdict (reserved + context, every rank) fits."""
    ranks = _placed(ROWS[label]).memory_by_rank
    assert max(m.required_bytes for m in ranks) <= system("gb200").gpu.hbm_bytes


def _case(label):
    marks = []
    if label == "Qwen3-235B TP2 EP16 MXFP8 (T5)":
        marks = [pytest.mark.xfail(strict=True, reason=(
            "measured -24.9% (129.2 GiB against 172 GiB): the baseline's PP, VPP "
            "and micro-batch are not stated - the rule gives it the offload run's PP 4 VPP 6 "
            "MBS 3 at TP 2 EP 16"))]
    if label == "DeepSeek-V3 TP1 PP8 EP32 VPP4 MXFP8 (T5)":
        marks = [pytest.mark.xfail(strict=True, reason=(
            "measured -13.9% (145.5 GiB against 169 GiB) under the rule's MXFP8 (Megatron-"
            "Bridge's bf16_with_mxfp8_mixed: FP8 param gather through the reused gradient "
            "buffer, as ModelZoo's sbatch_benchmarking.sh L98-101 sets it; -8.5% with BF16 "
            "params): the ModelZoo script's fp32 main grads bring it to -8.4% "
            "(benchmarks/mcore_table5_readings.py), a reading the rule does not take"))]
    return pytest.param(label, marks=marks)


@pytest.mark.parametrize("label", [_case(k) for k, r in ROWS.items()
                                   if r.metric != "outcome" and r.role != "chosen"])
def test_within_ten_percent(label):
    assert abs(error(ROWS[label])) <= 0.10, f"{error(ROWS[label]):+.1%}"


def test_rows_are_laid_out_on_their_systems_domain():
    """A GB200 row's ranks sit 4 to a host in a 72-GPU NVLink domain (the preset, as report
    lays them out), so HybridEP's buffer (outside the allocator, in the context) is sized for
    the 32 EP ranks of DeepSeek-V3's group sharing that domain - every token of the domain's
    ranks routed here (DeepEP hybrid-ep 94a9f8f6 csrc/hybrid_ep/buffer/intranode.cu
    L126-130): 4,096 tokens x 32 ranks of 7,168 BF16 values, fp32 probabilities over the
    domain's 8 x 32 experts and fp32 scales per 128 channels - not the 8 ranks of a DGX host."""
    row = ROWS["DeepSeek-V3 TP1 PP8 EP32 VPP4 MXFP8 (T5)"]
    worst = 4096 * 32
    want = worst * 7168 * 2 + worst * 8 * 32 * 4 + worst * (7168 // 128) * 4
    for m in _placed(row).memory_by_rank:
        assert dict(m.context_named)["HybridEP buffer"] == want
