"""Issue 30's rows that needed LatentMoE and MTP blocks: every Nemotron 3 Super and
Nemotron 3.5 Lightning row of the Megatron-Bridge tables runs; the tables' one published
out-of-memory placement is judged not to fit; what still does not run is named.

Figures held: Megatron-Bridge's verification cards (examples/model_verification_cards/
nemotron-3.5-lightning/card.yaml L59-63 @ 067f987df03b: 32,913,266,240 parameters with the
MTP block); the archive's footnote (docs/performance-summary-archive.md:292, in
ledger.validation.bridge.did_not_fit)."""
from collections import Counter
from dataclasses import replace

import pytest

from ledger.render.bridge import model_of, outcome
from ledger.validation.bridge import did_not_fit, rows

NEW = ("nemotron-3-super", "nemotron-3.5-lightning", "nemotron-3-ultra")


def _rows(models):
    return [r for r in rows() if r.model in models]


def test_every_super_and_lightning_row_runs():
    outs = [outcome(r) for r in _rows(NEW)]
    assert all(o.status == "ran" for o in outs), [(o.row.id, o.reason) for o in outs
                                                  if o.status != "ran"]
    by_gpu = Counter((o.row.gpu, o.row.model) for o in outs)
    assert by_gpu == {("b200", "nemotron-3-super"): 4, ("b300", "nemotron-3-super"): 6,
                      ("gb200", "nemotron-3-super"): 10, ("gb300", "nemotron-3-super"): 10,
                      ("gb200", "nemotron-3.5-lightning"): 1,
                      ("gb200", "nemotron-3-ultra"): 1, ("gb300", "nemotron-3-ultra"): 1}
    # published runs that ran: none judged not to fit
    assert all(o.fits for o in outs), [o.row.id for o in outs if not o.fits]


def test_every_deepseek_row_runs():
    """DeepSeek-V4 Flash's compressed attention and hyper-connections are modelled
    (tests/test_deepseek_v4.py) and 25.09 GB200 DeepSeek-V3 MXFP8 runs at its recipe's
    placement (``unrunnable_cells``): no DeepSeek row is left unrun."""
    left = {r.id: outcome(r) for r in _rows(("deepseek-v4-flash", "deepseek-v3"))}
    assert len(left) > 30 and sum("v4" in i for i in left) == 2
    assert {i: (o.status, o.reason) for i, o in left.items() if o.status != "ran"} == {}


def test_megatron_fsdp_from_the_recipe_where_the_table_has_no_column():
    """26.06 onward the tables drop their FSDP column: Nemotron 3 Ultra's recipes run
    Megatron-FSDP (HSDP); where a table states "no FSDP" (25.11 Llama 3.1 405B, whose recipe
    says yes) the table wins."""
    by = {r.id: r for r in rows()}
    for gpu in ("gb200", "gb300"):
        r = by[f"26.08/{gpu}/nemotron-3-ultra/fp8_mx/256g/gbs256/mbs1"]
        assert (r.fsdp, r.megatron_fsdp) == (False, True)
        assert r.setting("recompute_modules") == ["moe_act"]
    r = by["25.11/gb200/llama3.1-405b/fp8_cs/256g/gbs1536/mbs1"]
    assert r.setting("use_megatron_fsdp") is True and not r.megatron_fsdp
    # the 26.06+ rows whose recipe is read as FSDP: Ultra's two alone
    assert sorted(x.id for x in rows() if x.megatron_fsdp and not x.fsdp) == [
        "26.08/gb200/nemotron-3-ultra/fp8_mx/256g/gbs256/mbs1",
        "26.08/gb300/nemotron-3-ultra/fp8_mx/256g/gbs256/mbs1"]


def test_ultra_runs_what_it_does_not_price_named():
    (o,) = [outcome(r) for r in _rows(("nemotron-3-ultra",)) if r.gpu == "gb200"]
    assert o.status == "ran" and o.fits
    # its fine-grained activation offload (fused_group_mlp) is priced since issue 31's
    # ledger.placement.act_offload; HSDP is not
    assert not any("fine-grained activation offload" in a for a in o.approx)
    assert any("HSDP" in a for a in o.approx)


def test_the_published_out_of_memory_placement_does_not_fit():
    """26.04.01 B200 Nemotron 3 Super NVFP4 at the MXFP8 row's TP 1 / EP 64 "could not
    fit" (archive:292): judged not to fit; the TP 2 placement it then ran at, and the MXFP8
    run at TP 1, fit."""
    (r,) = did_not_fit()
    o = outcome(r)
    assert o.status == "ran" and not o.fits
    assert o.peak_bytes > o.capacity_bytes
    ran = {x.precision: outcome(x) for x in rows()
           if (x.release, x.gpu, x.model) == ("26.04.01", "b200", "nemotron-3-super")}
    assert ran["nvfp4"].row.tp == 2 and ran["nvfp4"].fits
    assert ran["fp8_mx"].row.tp == 1 and ran["fp8_mx"].fits


def test_lightning_is_nano_with_one_mtp_block_and_counts_its_checkpoint():
    """Nano's 23 MoE layers and the MTP block's one keep a 128-expert FP32 correction-bias
    buffer each, which the checkpoint counts and the ledger does not (as for Super)."""
    (r,) = _rows(("nemotron-3.5-lightning",))
    m = model_of(r)
    assert (m.mtp_pattern, m.moe_layers, m.num_experts) == ("*E", 23, 128)
    assert m.params + m.mtp_params + 24 * 128 == 32_913_266_240
    # its recipe: mtp_num_layers 2 over the one block (row settings, v0.6.0)
    assert (m.mtp_layers, m.mtp_shared) == (2, True)


def test_super_runs_its_recipe_mtp_depths():
    r = next(x for x in _rows(("nemotron-3-super",)) if x.release == "26.06")
    m = model_of(r)
    assert (m.mtp_layers, m.mtp_shared, m.mtp_pattern) == (2, True, "*E")
    assert m.mtp_params == 2_942_324_736  # one block's weights for both depths


def test_the_dispatch_carries_the_latent_width():
    """Megatron-Core projects hidden -> latent before the dispatch and back after the
    combine (moe_layer.py:488-492, :591-592 at d98e8a64dd): the EP all-to-all bytes are
    those of 1024-wide rows, a quarter of a 4096-wide model's at the same placement."""
    from ledger.placement import place
    from ledger.render.bridge import config_of, precision_of

    r = next(x for x in _rows(("nemotron-3-super",)) if x.id.startswith("26.06/gb200")
             and x.precision == "fp8_mx")
    m = model_of(r)
    prec, _ = precision_of(r)
    cfg, _ = config_of(r, prec, m)
    # the alltoall dispatcher's rows alone: the recipe's HybridEP also carries each token's
    # fp32 probs for the domain's experts (hybrid_ep_backend.cuh L1639-1645 @ 94a9f8f6),
    # bytes that do not scale with the width
    cfg = replace(cfg, moe_dispatcher="alltoall")

    def ep_bytes(model):
        return sum(c.bytes for c in place(model, cfg, precision=prec).comms if c.axis == "ep")

    assert ep_bytes(m) == pytest.approx(ep_bytes(replace(m, moe_latent=None)) * 1024 / 4096)


def test_the_benchmark_prints_the_out_of_memory_verdict():
    from ledger.render.bridge import oom_lines

    (line,) = oom_lines()[1:]
    assert "26.04.01/b200/nemotron-3-super/nvfp4" in line and "does NOT fit (right)" in line


def test_ultra_offloads_its_fused_grouped_mlp():
    from ledger.render.bridge import config_of, model_of, precision_of

    (r,) = [r for r in _rows(("nemotron-3-ultra",)) if r.gpu == "gb200"]
    model = model_of(r)
    cfg, _ = config_of(r, precision_of(r)[0], model)
    assert cfg.offload_modules == ("fused_group_mlp",)
