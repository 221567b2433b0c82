"""A Megatron-Bridge table cell held against its recipe: micro-batch pairs of alike runs, and
each kind of cell the table and its recipe disagree on (contradicted, set for another
layout, copied from a sibling line, carried over from the last release, unable to run,
shipped by no recipe) yields to the recipe; a row its table declares regressed is shown
and summed apart."""
import pytest

from ledger.validation.bridge import rows
from test_bridge import BY_ID, ROWS


def test_micro_batch_pairs_of_alike_runs():
    from ledger.render.bridge import mbs_pairs, outcomes

    got = {label: (a, b, pub) for label, a, b, pub, _ in mbs_pairs(list(outcomes()))}
    # archive: 26.02 DGX-B200 Qwen3_30B_a3B MXFP8 MBS 1 -> 9691; 26.04.01 MBS 4 -> 27136
    # (8 GPUs, TP 1, PP 1, EP 8 in both); 26.02.01's MBS 4 row is older than 26.04.01's
    a, b, pub = got["b200 qwen3-30b-a3b fp8_mx 8g (26.02 / 26.04.01)"]
    assert (a, b) == (1, 4) and pub == pytest.approx(27136 / 9691)


def test_a_table_mbs_both_the_table_and_the_recipe_contradict_yields_to_the_recipe():
    """25.11 H100 GPT-OSS 120B: MBS 4, GA 2 published (512 / (4 x 16) = 8, not 2); the
    v0.2.0 recipe says MBS 1: priced at 1, 512 / (1 x 16) = 32 micro-batches. A row whose
    table agrees with itself keeps the table's MBS even where the recipe differs."""
    by = {r.id: r for r in rows()}
    r = by["25.11/h100/gpt-oss-120b/bf16/64g/gbs512/mbs4"]
    assert (r.mbs, r.micro_batch, r.num_microbatches) == (4, 1, 32)
    q = by["25.11/h100/qwen3-30b-a3b/fp8_cs/16g/gbs512/mbs2"]  # recipe MBS 1, table consistent
    assert (q.disagree["mbs"], q.micro_batch) == ({"table": 2, "recipe": 1}, 2)


def test_a_recipe_for_another_layout_does_not_set_the_tables_mbs():
    """25.11 GB300 Qwen3-235B BF16: TP 1 PP 4 VP 12 EP 16 on 256 GPUs, MBS 2, GA 32 published
    (8192 / (2 x 64) = 64, not 32); its v0.2.0 recipe is another placement (TP 2 PP 1 EP 64
    on 64 GPUs, MBS 4), so the table's MBS 2 stands (the V2 config of v0.3.0 that runs the
    table's layout says MBS 2: qwen3_workload_base_configs.py L187-194 over V1 L54-64).
    25.09 GB200 Llama 3 70B MXFP8, whose recipe disagrees on the MBS alone, still yields."""
    by = {r.id: r for r in rows()}
    r = by["25.11/gb300/qwen3-235b-a22b/bf16/256g/gbs8192/mbs2"]
    assert r.disagree["mbs"] == {"table": 2, "recipe": 4} and "tp" in r.disagree
    assert (r.micro_batch, r.num_microbatches) == (2, 64)
    ll = by["25.09/gb200/llama3-70b/fp8_mx/64g/gbs128/mbs2"]
    assert (ll.mbs, ll.micro_batch) == (2, 1)


def test_a_cell_copied_from_a_sibling_line_yields_to_the_recipe():
    """26.02.01 GB300 Llama 3 70B NVFP4 reads TP 1 PP 1 MBS 2 and MXFP8 PP 4 MBS 2 with no VP
    (archive L399 / L401 @ 067f987d), the FP8 Megatron-FSDP line's MBS 2 and 'n/a' (L403);
    their v0.3.1 recipes and the 26.02 / 26.04 / 26.04.01 tables say PP 4 VP 5 MBS 1. Those
    cells, and only cells with both witnesses, are priced at the recipe's values; the
    table's stay in the row (id, disagree). A disagreement without a sibling line to have
    been copied from keeps the table (25.11 GB300 Qwen3-235B: TP 1 PP 4 against the recipe's
    TP 2 PP 1)."""
    from ledger.validation.bridge import copied_cells

    moved = {r.id: copied_cells(r, ROWS) for r in ROWS if copied_cells(r, ROWS)}
    assert moved == {
        "26.02.01/gb300/llama3-70b/nvfp4/64g/gbs256/mbs2": {"mbs": 1, "pp": 4, "vp": 5},
        "26.02.01/gb300/llama3-70b/fp8_mx/64g/gbs256/mbs2": {"mbs": 1, "vp": 5},
        "26.02.01/gb200/llama3.1-405b/nvfp4/256g/gbs1536/mbs1": {"vp": 8},
        "26.02.01/gb300/llama3.1-405b/fp8_cs/256g/gbs1536/mbs1": {"tp": 4, "cp": 1},
        "25.09/gb200/llama3-70b/fp8_mx/64g/gbs128/mbs2": {"mbs": 1},
        # copied from the previous release's line (test below)
        "26.02.01/h100/qwen3-30b-a3b/fp8_cs/16g/gbs1024/mbs1": {"pp": 1, "vp": None, "ep": 16},
        "26.02.01/b300/qwen3-235b-a22b/fp8_mx/256g/gbs8192/mbs1": {"vp": None},
        "25.11/h100/qwen3-30b-a3b/fp8_cs/16g/gbs512/mbs2": {"mbs": 1, "vp": 12}}
    r = BY_ID["26.02.01/gb300/llama3-70b/nvfp4/64g/gbs256/mbs2"]
    run = r.as_run()
    assert (r.tp, r.pp, r.vp, r.mbs) == (1, 1, None, 2)  # the table's cells, kept
    assert (run.tp, run.pp, run.vp, run.micro_batch, run.num_microbatches) == (1, 4, 5, 1, 16)
    q = BY_ID["25.11/gb300/qwen3-235b-a22b/bf16/256g/gbs8192/mbs2"]
    assert q.as_run() is q


def test_a_cell_carried_over_from_the_previous_releases_line_yields_to_the_recipe():
    """25.11 H100 Qwen3-30B states MBS 2 VP 24 GA 32 (archive L593 @ 067f987d): the 25.09
    line's cells (L632, whose YAML recipe agrees), while its own v0.2.0 recipe runs MBS 1
    VP 12 (qwen3/workload_base_configs.py L233-240) and the 26.02 table states MBS 1 VP 12;
    26.02.01 H100 Qwen3-30B states the 26.02 line's PP 2 VP 12 EP 8 (L445 / L530) while
    v0.3.1 runs PP 1 EP 16 (Megatron-Bridge f29a269f, in v0.3.1, not v0.3.0) as the 26.04
    table states. Both are priced at the recipe's cells; the table's stay in the row."""
    q = BY_ID["25.11/h100/qwen3-30b-a3b/fp8_cs/16g/gbs512/mbs2"]
    run = q.as_run()
    assert (q.mbs, q.vp, q.micro_batch) == (2, 24, 2)  # the table's, kept
    assert (run.micro_batch, run.vp, run.num_microbatches) == (1, 12, 64)
    h = BY_ID["26.02.01/h100/qwen3-30b-a3b/fp8_cs/16g/gbs1024/mbs1"].as_run()
    assert (h.pp, h.vp, h.ep, h.dp, h.num_microbatches) == (1, None, 16, 16, 64)
    # a line repeating an older release's cells its own recipe also states keeps them
    g = BY_ID["26.04/h100/qwen3-30b-a3b/fp8_cs/16g/gbs1024/mbs1"]
    assert g.as_run() is g


def test_a_table_placement_that_cannot_run_yields_to_its_recipe():
    """25.09 GB200 DeepSeek-V3 MXFP8 (archive L610 @ 067f987d) states PP 8 VP 2 on 256 GPUs
    with EP 64: DP 32 cannot hold an EP-64 group, so Megatron would refuse it, yet the run
    ran. Its recipe (v0.1.0rc3 deepseek_v3_llm_pretrain.yaml L98) runs PP 4 VP 8, and the
    row is priced there. Its FP8-CS twin states VP 4 at PP 4, which Megatron-Core refuses
    under the recipe's 32-stage layout "Et|(tt|)*30mL" (VP must be 32 / 4): priced at the
    recipe's VP 8. The B200 rows (archive L620) state TP 1 PP 16 without interleaving (the
    25.09 tables write VP 1 for none); the same launch passes them the same 32-stage layout
    with VP unset (YAML L78-91: TP 2 PP 16, vp null), which Megatron-Core runs at VP 32 / 16
    = 2 (transformer_config.py L996-997 at core_v0.14.0): a PP 16 run without interleaving
    cannot be that layout's, and they are priced at the recipe as Megatron runs it, TP 2 PP
    16 VP 2. Every other row keeps the table's."""
    from ledger.render.bridge import outcomes
    from ledger.validation.bridge import unrunnable_cells
    from ledger.validation.bridge_cells import _layout_refuses

    moved = {r.id: unrunnable_cells(r) for r in ROWS if unrunnable_cells(r)}
    assert moved == {"25.09/gb200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1": {"pp": 4, "vp": 8},
                     "25.09/gb200/deepseek-v3/fp8_cs/256g/gbs2048/mbs1": {"vp": 8},
                     "25.09/b200/deepseek-v3/fp8_cs/256g/gbs2048/mbs1": {"tp": 2, "vp": 2},
                     "25.09/b200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1": {"tp": 2, "vp": 2}}
    r = BY_ID["25.09/gb200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"]
    run = r.as_run()
    assert (r.pp, r.vp, r.dp) == (8, 2, 32) and (run.pp, run.vp, run.dp) == (4, 8, 64)
    cs = BY_ID["25.09/gb200/deepseek-v3/fp8_cs/256g/gbs2048/mbs1"]
    assert _layout_refuses(cs) and not _layout_refuses(cs.as_run())
    assert (cs.vp, cs.as_run().vp, cs.as_run().layout(1)[0]) == (4, 8, "Et|(tt|)*30mL")
    b = BY_ID["25.09/b200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"]
    run = b.as_run()
    assert (b.tp, b.pp, b.vp) == (1, 16, None) and _layout_refuses(b)
    assert (run.tp, run.pp, run.vp, run.dp) == (2, 16, 2, 8) and not _layout_refuses(run)
    assert run.layout(1)[0] == "Et|(tt|)*30mL" and run.id == b.id
    # a row whose recipe passes no layout is never held to one (25.11 B200: v0.2.0's map)
    eleven = BY_ID["25.11/b200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"]
    assert not _layout_refuses(eleven) and eleven.as_run() is eleven
    out = {o.row.id: o for o in outcomes()}
    assert all(out[i].status == "ran" and out[i].fits for i in moved)
    # 25.09 B200 Qwen3-30B: the table's PP 1 runs, its YAML recipe's PP 8 VP 12 with EP 8 on
    # 8 GPUs does not (qwen3_30b_a3b_llm_pretrain.yaml L92-106 @ v0.1.0rc3): the table stands
    from dataclasses import replace

    from ledger.validation.bridge_cells import _runs
    q = BY_ID["25.09/b200/qwen3-30b-a3b/fp8_cs/8g/gbs512/mbs1"]
    assert q.disagree["pp"] == {"table": 1, "recipe": 8} and _runs(q)
    assert not _runs(replace(q, pp=8, vp=12)) and q.as_run() is q


def test_a_cell_no_recipe_of_its_line_ships_yields_to_the_recipe():
    """25.11 B200 GPT-OSS 120B states EP 8 (archive L581 @ 067f987d: the base preset's EP and
    the H100 line's, L592), where its v0.2.0 recipe (gpt_oss/workload_base_configs.py L50-55)
    and the next release's, v0.3.0 (gpt_oss_workload_base_configs.py L71-76, L108-111; the
    26.02 B200 line, EP 64), both run EP 64: priced at
    EP 64. 26.02.01 B200 / B300 state EP 8 against v0.3.1's EP 64, but v0.4.0 ships EP 8
    (Megatron-Bridge 7260d621): kept. On every row the rule moves, the cells it moves agree
    with copied_cells' where both move them; the only row it alone moves is 25.11 B200."""
    from ledger.validation.bridge import copied_cells, unrunnable_cells, unshipped_cells

    moved = {r.id: unshipped_cells(r, ROWS) for r in ROWS if unshipped_cells(r, ROWS)}
    assert moved == {
        "26.02.01/gb300/llama3-70b/nvfp4/64g/gbs256/mbs2": {"vp": 5},
        "26.02.01/gb300/llama3-70b/fp8_mx/64g/gbs256/mbs2": {"vp": 5},
        "26.02.01/gb200/llama3.1-405b/nvfp4/256g/gbs1536/mbs1": {"vp": 8},
        "26.02.01/b300/qwen3-235b-a22b/fp8_mx/256g/gbs8192/mbs1": {"vp": None},
        "25.11/h100/qwen3-30b-a3b/fp8_cs/16g/gbs512/mbs2": {"vp": 12},
        "25.11/b200/gpt-oss-120b/bf16/64g/gbs512/mbs4": {"ep": 64}}
    alone = {}
    for rid, cells in moved.items():
        first = copied_cells(BY_ID[rid], ROWS) or unrunnable_cells(BY_ID[rid])
        assert all(first[k] == v for k, v in cells.items()) if first else True
        if not first:
            alone[rid] = cells
    assert alone == {"25.11/b200/gpt-oss-120b/bf16/64g/gbs512/mbs4": {"ep": 64}}
    r = BY_ID["25.11/b200/gpt-oss-120b/bf16/64g/gbs512/mbs4"]
    run = r.as_run()
    assert r.ep == 8 and r.disagree["ep"] == {"table": 8, "recipe": 64}  # the table's, kept
    assert (run.ep, run.dp, run.micro_batch, run.num_microbatches) == (64, 64, 4, 2)
    for gpu in ("b200", "b300"):
        k = BY_ID[f"26.02.01/{gpu}/gpt-oss-120b/bf16/64g/gbs1280/mbs4"]
        assert k.disagree["ep"] == {"table": 8, "recipe": 64} and k.as_run() is k


def test_a_row_its_table_declares_regressed_is_shown_and_summed_apart():
    """26.06.01's GPT-OSS 120B rows carry the table's footnote (archive L90 @ 067f987d:
    "Performance regression in GPT-OSS 120B pre-training is a known issue",
    cudnn-frontend issue 256); no other row's notes declare one. They are neither
    calibration nor prediction: the table shows them, marked, and sums them on their own
    line; the prediction lines and the beyond-15% / 25% counts leave them out."""
    from ledger.render.bridge import bridge_table, outcomes

    regressed = sorted(r.id for r in ROWS if r.role == "regressed")
    assert regressed == ["26.06.01/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4",
                         "26.06.01/gb300/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4"]
    assert all("cudnn-frontend/issues/256" in BY_ID[i].regression for i in regressed)
    # the same recipe's 26.06 rows (no footnote) stay predictions
    assert BY_ID["26.06/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4"].role == "prediction"
    text = bridge_table().splitlines()
    for i in regressed:
        line = next(x for x in text if x.startswith(i))
        assert "measured under its table's declared regression" in line
    ran = [o for o in outcomes() if o.error is not None]
    n_pred = sum(o.row.role == "prediction" for o in ran)
    summary = {x.split("mean")[0].strip(): x for x in text if "mean |error|" in x}
    assert f"n {n_pred:3d}" in summary["prediction"] and "n   2" in summary["regressed"]
    beyond = next(x for x in text if x.startswith("  prediction rows beyond 15%"))
    assert beyond.endswith(f"of {n_pred}")
