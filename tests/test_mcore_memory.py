"""DeepSeek-V3's memory per GPU in the Megatron Core MoE report against the ledger
(ledger.validation.mcore_moe.MEMORY, ledger.render.mcore_memory).

Golden figures copied from "Scalable Training of Mixture-of-Experts Models with Megatron
Core", arXiv 2603.07685v2, as extracted in AICO-Ascend/AICO-Knowledge @
14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8, extraction/fulltext/scalable-training-of-mixture-
of-experts-models-with-megatron-core.txt: Table 3 (p.20: activations 131.0 GB), sec. 4.1.2
(p.21: memory-efficient permutation saves ~26.3 GB), sec. 4.1.3 (p.22: FP8 ~16 GB of
activations), Table 4 (p.24: recompute MLA up-projection 30.4 GB, SwiGLU 3.8 GB, LayerNorm
8.2 GB, total 42.4 GB), all at "PP4 x VPP4 x EP64, 256 GPUs", BF16; Table 17 (p.74) for
the GB200 column that configuration is.

The paper's "GB" is read one way for all its figures, 2^30 B (``mcore_moe.GB``: the units
Megatron-LM's report_memory prints); a figure agrees within issue 31's bar for a measured
row, |error| <= 10%. (A first version of this test, written after the comparison was
printed, read GB as 10^9 and widened a band over both readings; a review asked for one
reading and one bar, and this is it.)
"""
from dataclasses import replace

import pytest

import ledger.placement.layers as layers
from ledger.render import mcore_memory as mm
from ledger.validation import mcore_moe

PAPER = {"activations, none of Table 3's remedies": 131.0, "recompute mla_up_proj": 30.4,
         "recompute moe_act": 3.8, "recompute layernorm": 8.2, "recompute all three": 42.4,
         "memory-efficient permutation": 26.3, "FP8 activations": 16.0}
# what the ledger prices from Megatron-Core's own tensors and the paper does not match; no
# source found that would move the ledger (the report does not say how it got its figures)
DIFFERS = {
    "recompute mla_up_proj": (
        "ledger 38.7 GiB: Megatron-Core d98e8a64 multi_latent_attention.py L983-990 checkpoints "
        "q, k and v (65,536 elements a token) and L455-458 discards them after the kernel, on "
        "76 layer-micro-batches in flight on rank 0; the paper's 30.4 GB is q and k alone "
        "(49,152) at that count (28.5 GiB) - v kept by something the ledger does not see, "
        "or another count"),
    "recompute moe_act": (
        "ledger 6.8 GiB: experts.py L1019-1030 discards fc2's input, top-k x 2,048 BF16 "
        "elements a token, on 55 MoE layer-micro-batches in flight; the paper's 3.8 GiB is "
        "about half of that"),
    "recompute all three": "the sum of the two above and layernorm (52.5 GiB against 42.4)",
    # rank 0's peak holds 7 micro-batches of its first chunk (3 dense layers and 1 MoE) and
    # 4 of each other (Megatron's interleaved warm-up walks the chunks in rounds of pp:
    # schedules.py L957-965, L989-1016; ledger.placement.chunks): the even weighting the
    # paper's figures agreed with before gave 8.9% and 1.1% under
    "recompute layernorm": (
        "ledger 7.1 GiB (-13.4%): the norms' inputs on rank 0's chunks in flight as "
        "Megatron's schedule holds them (7 of the first chunk, 4 of each other)"),
    "FP8 activations": (
        "ledger 14.4 GiB (-10.0%, just past the bar): the saving on rank 0's chunks in "
        "flight as Megatron's schedule holds them (7 of the first chunk, 4 of each other)"),
}


def test_table3_is_table_17s_gb200_column_in_bf16():
    """TP1/PP4/EP64, VPP 4, GBS 8192 / MBS 1 / seq 4096 on 256 GPUs (Table 17, p.74),
    sec. 9.2.2's 16-stage layout, BF16, no recompute, no CUDA graphs."""
    model, cfg, gpu = mm.table3_config()
    assert (cfg.tp, cfg.pp, cfg.vp, cfg.ep, cfg.dp, cfg.cp) == (1, 4, 4, 64, 64, 1)
    assert cfg.tp * cfg.pp * cfg.dp == 256
    assert (cfg.micro_batch, model.seq_len) == (1, 4096)
    assert cfg.micro_batch * cfg.num_microbatches * cfg.dp == 8192
    assert cfg.stage_layers == (4,) * 15 + (1,)
    assert (cfg.precision, cfg.recompute, cfg.cuda_graph) == (None, "none", ())
    assert model.name == "deepseek-v3" and model.mtp_layers == 1 and gpu.name == "gb200"
    assert [m[0] for m in mcore_moe.MEMORY] == list(PAPER)
    assert [m[1] for m in mcore_moe.MEMORY] == list(PAPER.values())


def test_the_modules_save_what_megatron_discards_by_hand():
    """Per token, BF16: mla_up_proj drops q, k, v (128 heads x (192 + 192 + 128) x 2 B) and
    what the up-projections' fused norms kept of the latents (input, output, fp32 rsigma:
    1,536 + 512 wide) less the latents the checkpoint keeps: 131,072 + 4,104 B; on every
    layer of the 19 chunk-micro-batches rank 0 holds at its peak (Megatron's interleaved
    warm-up (pp - 1) x 2 + (vpp - 1) x pp = 18, plus one) of 4 layers each. moe_act drops
    fc2's input, 8 x 2,048 x 2 B a token, on the MoE layers: rank 0's chunks hold 13 of
    its 16 layers (layers 0-2 are dense, its first chunk 1 MoE layer), the 19 as Megatron's
    schedule walks them - forwards 0-3 and 16-18 of the first chunk, 4 of each other (rounds
    of pp micro-batches a chunk, schedules.py L989-1016 @d98e8a64): 7 x 1 + 4 x 4 x 3 = 55."""
    mla = mm._saved("activations", recompute="selective", recompute_modules=("mla_up_proj",))
    assert mla == 19 * 4 * 4096 * (128 * (192 + 192 + 128) * 2 + 4104) == 42_079_748_096
    act = mm._saved("activations", recompute="selective", recompute_modules=("moe_act",))
    assert act == (7 * 1 + 4 * 4 * 3) * 4096 * 8 * 2048 * 2


def test_permutation_is_the_table_with_expert_outputs_kept(monkeypatch):
    """The standard formulation priced with Megatron's table keeping one h-wide expert
    output per routed token (routed_output_copies 1) saves what ``ledger_bytes`` prices
    from the moe_act saving times h / f."""
    base = mm._ranks()[mm.peak_rank()].activations_bytes
    real = layers._table
    monkeypatch.setattr(layers, "_table", lambda *args: replace(
        real(*args), routed_output_copies=1))
    from ledger.placement import place

    model, cfg, gpu = mm.table3_config()
    std = place(model, cfg, gpu=gpu).memory_by_rank[mm.peak_rank()].activations_bytes
    assert std - base == pytest.approx(mm.ledger_bytes("memory-efficient permutation",
                                                       "activations"), rel=1e-12)


def _case(what):
    marks = [pytest.mark.xfail(strict=True, reason=DIFFERS[what])] if what in DIFFERS else []
    return pytest.param(what, marks=marks, id=what.split(",")[0].replace(" ", "-"))


@pytest.mark.parametrize("what", [_case(w) for w in PAPER])
def test_the_paper_and_the_ledger_agree(what):
    mine = dict((r[0], r[2]) for r in mm.rows())[what]
    assert mcore_moe.GB == 2**30
    paper = PAPER[what] * 2**30
    assert abs(mine / paper - 1) <= 0.10, f"ledger {mine / 2**30:.1f} GiB"


def test_the_printed_table():
    out = mm.lines()
    assert out[0].startswith("DeepSeek-V3, Table 3's configuration: TP 1 PP 4 VPP 4 EP 64 "
                             "DP 64") and out[0].endswith("rank 0 peaks")
    assert len(out) == 2 + len(PAPER)


def test_docs_show_the_comparison():
    from pathlib import Path
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "memory.md").read_text(
        encoding="utf-8")
    assert "\n".join(mm.lines()) + "\n" in re.findall(r"```text\n(.*?)```", page, re.S)
