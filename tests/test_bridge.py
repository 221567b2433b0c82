"""Megatron-Bridge's published pre-training rows (ledger.validation.bridge): well-formed, each
with its source, and a few rows' figures checked by hand against the table text."""
import re

import pytest

from ledger.validation.bridge import CONFIG, LACKS, MOE, PRESET, rows, rule, source

ROWS = rows()
BY_ID = {r.id: r for r in ROWS}


def _one(**kw):
    hits = [r for r in ROWS if all(getattr(r, k) == v for k, v in kw.items())]
    assert len(hits) == 1, (kw, [h.id for h in hits])
    return hits[0]


def test_ids_are_unique():
    assert len(BY_ID) == len(ROWS)


def test_rows_per_release_as_counted_in_the_table_text():
    # counted by hand in docs/performance-summary*.md at 067f987df0: one row a table line, plus
    # one for each line with parenthesised figures (25.11: 4 such lines, 25.09: 11)
    counts = {"26.08": 18, "26.06.01": 14, "26.06": 31, "26.04.01": 47, "26.04": 44,
              "26.02.01": 36, "26.02": 33, "25.11": 32, "25.09": 28}
    got = {}
    for r in ROWS:
        got[r.release] = got.get(r.release, 0) + 1
    assert got == counts


@pytest.mark.parametrize("r", ROWS, ids=lambda r: r.id)
def test_row_is_well_formed(r):
    src = r.source
    assert src["repo"] == "NVIDIA-NeMo/Megatron-Bridge"
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["line"] > 0
    assert src["path"] in ("docs/performance-summary.md", "docs/performance-summary-archive.md")
    rec = r.recipe
    assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"]) and rec["ref"].startswith("v0.")
    assert rec["config"] and rec["path"] and rec["line"] > 0, rec
    assert r.gpu in ("h100", "b200", "b300", "gb200", "gb300")
    assert r.precision in ("bf16", "fp8_cs", "fp8_mx", "fp8_sc", "nvfp4")
    for k in ("gpus", "gbs", "mbs", "seq_len", "tp", "pp", "cp", "ep"):
        v = getattr(r, k)
        assert isinstance(v, int) and v >= 1, (k, v)
    assert r.vp is None or (isinstance(r.vp, int) and r.vp > 1)
    # parallel sizes divide the GPU count; EP divides the data x context ranks it folds into;
    # where the table contradicts itself the row says so (and only there)
    assert r.gpus % (r.tp * r.pp * r.cp) == 0
    assert r.gbs % (r.mbs * r.dp) == 0, (r.gbs, r.mbs, r.dp)
    said = " ".join(r.table_inconsistent)
    assert ((r.dp * r.cp * r.tp) % (r.ep * (r.etp or 1)) == 0) == ("cannot run" not in said)
    if r.ga is not None:  # 25.09 / 25.11 publish the gradient-accumulation count
        assert (r.ga == r.gbs // (r.mbs * r.dp)) == ("GA" not in said)
    assert r.tokens_per_s_per_gpu is not None or r.published_as == "parenthesised figure"
    assert r.model_tflops_per_gpu > 0
    for key, pair in r.disagree.items():
        assert set(pair) == {"table", "recipe"} and pair["table"] != pair["recipe"], key


def test_every_model_is_mapped_or_said_to_lack_something():
    for r in ROWS:
        assert (r.model in PRESET) + (r.model in CONFIG) + (r.model in LACKS) == 1, r.model


def test_source_and_rule_are_stated():
    s = source()
    assert s["release_refs"]["26.06"] == "v0.5.0" and s["release_refs"]["25.11"] == "v0.2.0"
    assert "table" in rule() and "recipe" in rule()


def test_the_patch_release_26_04_01_is_read_at_megatron_bridge_0_4_2():
    # the docs' version switcher at the tables' commit pairs "0.4.2 · 26.04.01"
    # (docs/versions1.json L23 @ 067f987d), not 0.4.1: at v0.4.2 the B200 DeepSeek-V3 recipe
    # is the table's own run - PP 8, VP 2, EP 32 over four 8-GPU hosts, DeepEP, the combined
    # 1F1B (deepseek_workload_base_configs.py, DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2,
    # commit a8b6cb3d) - where v0.4.1's PP 16 EP 8 disagreed on three cells
    assert source()["release_refs"]["26.04.01"] == "v0.4.2"
    r = _one(release="26.04.01", gpu="b200", model="deepseek-v3")
    assert r.recipe["ref"] == "v0.4.2" and r.disagree == {}
    assert (r.pp, r.vp, r.ep) == (8, 2, 32)
    assert r.setting("moe_flex_dispatcher_backend") == "deepep"
    assert r.setting("moe_a2a_overlap") is True
    assert r.setting("recompute_modules") == ["mla_up_proj", "mlp"]
    # and its B300 twin's PP 8 MBS 2, which v0.4.1's PP 16 MBS 1 contradicted
    assert _one(release="26.04.01", gpu="b300", model="deepseek-v3").disagree == {}


def test_the_tables_own_contradictions_are_the_four_found_by_hand():
    # GA against GBS / (MBS x DP), and EP against the ranks it folds into, read off the text
    assert {r.id for r in ROWS if r.table_inconsistent} == {
        "25.11/gb300/qwen3-235b-a22b/bf16/256g/gbs8192/mbs2",  # GA 32, 8192 / (2 x 64) = 64
        "25.11/h100/gpt-oss-120b/bf16/64g/gbs512/mbs4",  # GA 2, 512 / (4 x 16) = 8
        "25.09/gb200/llama3-70b/fp8_mx/64g/gbs128/mbs2",  # GA 16, 128 / (2 x 8) = 8
        "25.09/gb200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"}  # PP 8 leaves 32 ranks, EP 64


def test_golden_rows_against_the_table_text():
    # docs/performance-summary.md:45 (26.08)
    # | DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 | 1635 |
    r = _one(release="26.08", gpu="gb300", model="deepseek-v3")
    assert (r.gpus, r.precision, r.gbs, r.mbs, r.seq_len, r.tp, r.pp, r.cp, r.vp, r.ep) == \
        (256, "fp8_mx", 4096, 1, 4096, 1, 2, 1, 8, 32)
    assert (r.tokens_per_s_per_gpu, r.model_tflops_per_gpu) == (6288, 1635)
    assert r.source["line"] == 45
    # archive, 26.06 LLAMA3.1_405B:
    # | DGX-H100 | 1024 | FP8 | 1536 | 1 | 8192 | 8 | 8 | 2 | 8 | n/a | 326 | 822 |
    r = _one(release="26.06", gpu="h100", model="llama3.1-405b")
    assert (r.gpus, r.precision, r.tp, r.pp, r.cp, r.vp, r.ep, r.dp) == \
        (1024, "fp8_cs", 8, 8, 2, 8, 1, 8)
    assert (r.tokens_per_s_per_gpu, r.model_tflops_per_gpu) == (326, 822)
    # 25.11 GB300: | LLAMA3_8B | 8 | FP8-CS (FP8-MX) | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a |
    #               1 | 8 | 37556 (36108) | 1933 (1858) |
    cs = _one(release="25.11", gpu="gb300", model="llama3-8b", precision="fp8_cs")
    mx = _one(release="25.11", gpu="gb300", model="llama3-8b", precision="fp8_mx")
    assert (cs.tokens_per_s_per_gpu, cs.model_tflops_per_gpu) == (37556, 1933)
    assert (mx.tokens_per_s_per_gpu, mx.model_tflops_per_gpu) == (36108, 1858)
    assert cs.ga == mx.ga == 8 and cs.source["line"] == mx.source["line"]
    # 25.09 GB200: | LLAMA3_70B | 64 | 128 | 2 | 8192 | 0 (FSDP 64 (0)) | 1 (2) | 1 (4) | 1 |
    #               1 (5) | 1 | 1 (16) | 3986 (3546) | 1791 (1593) |
    mx = _one(release="25.09", gpu="gb200", model="llama3-70b", precision="fp8_mx")
    assert (mx.fsdp, mx.tp, mx.pp, mx.vp, mx.ga, mx.tokens_per_s_per_gpu) == \
        (False, 2, 4, 5, 16, 3546)
    cs = _one(release="25.09", gpu="gb200", model="llama3-70b", precision="fp8_cs")
    assert (cs.fsdp, cs.tp, cs.pp, cs.vp, cs.ga, cs.tokens_per_s_per_gpu) == \
        (True, 1, 1, None, 1, 3986)
    # 25.09 H100: | DeepSeekV3 (dropless) | ... | 1297 | 338 (330) |: no tokens/s for the twin
    sc = _one(release="25.09", gpu="h100", model="deepseek-v3", precision="fp8_sc")
    assert (sc.tokens_per_s_per_gpu, sc.model_tflops_per_gpu) == (None, 330)
    assert sc.model_variant == "dropless"
    # 26.04.01 B200 Nemotron_3_Super NVFP4, TP 2 with its footnote
    r = _one(release="26.04.01", gpu="b200", model="nemotron-3-super", precision="nvfp4")
    assert (r.tp, r.ep, r.tokens_per_s_per_gpu, r.model_tflops_per_gpu) == (2, 64, 5632, 475)
    assert any("could not fit" in n for n in r.notes)


@pytest.mark.parametrize("row_id,starts_from,held", [
    # perf_recipes/deepseek/gb300/deepseek_v4.py L31 @ v0.6.0 runs the GB200 function
    # (gb200/deepseek_v4.py L27-80): EP 64 L36, GBS 2048 L40, recompute mla_up_proj L54,
    # set_full_iteration_cuda_graph L65 (utils/cuda_graph.py L95-105: impl full_iteration)
    ("26.08/gb300/deepseek-v4-flash/fp8_mx/128g/gbs2048/mbs1",
     "deepseek_v4_flash_pretrain_128gpu_gb300_fp8mx_config",
     {"model.expert_model_parallel_size": 64, "train.global_batch_size": 2048,
      "model.recompute_modules": ["mla_up_proj"],
      "model.cuda_graph_impl": "full_iteration"}),
    # perf_recipes/nemotronh/gb300/nemotronh.py L276 runs the shared builder L215-264:
    # offload of fused_group_mlp L254, recompute moe_act L259
    ("26.08/gb300/nemotron-3-ultra/fp8_mx/256g/gbs256/mbs1",
     "nemotron_3_ultra_pretrain_256gpu_gb300_fp8mx_config",
     {"model.offload_modules": ["fused_group_mlp"], "model.recompute_modules": ["moe_act"]}),
    # perf_recipes/nemotronh/gb200/nemotronh.py L494 runs Nano's GB200 function (L357-):
    # HybridEP L372, TE CUDA graphs L375; then its own MTP L495
    ("26.08/gb200/nemotron-3.5-lightning/fp8_mx/8g/gbs512/mbs2",
     "nemotron_3_5_lightning_pretrain_8gpu_gb200_fp8mx_config",
     {"model.moe_flex_dispatcher_backend": "hybridep",
      "model.cuda_graph_impl": "transformer_engine", "model.mtp_num_layers": 2}),
])
def test_a_recipe_that_starts_from_another_carries_its_settings(row_id, starts_from, held):
    """tools/bridge_recipes.py expands ``cfg = other_recipe()`` in place: a 0.6 recipe
    function that starts from another perf recipe has that one's settings, then its own."""
    r = BY_ID[row_id]
    assert r.recipe["config"] == starts_from
    assert {k: r.recipe["settings"].get(k) for k in held} == held


def test_the_cuda_graph_helpers_a_recipe_calls_set_what_it_is_priced_with():
    from ledger.render.bridge_launch import graph_scopes

    # set_full_iteration_cuda_graph (utils/cuda_graph.py L95-105 @ v0.6.0), called by the
    # GB200 DeepSeek-V4 recipe, which the GB300 one runs whole
    for gpu in ("gb200", "gb300"):
        r = BY_ID[f"26.08/{gpu}/deepseek-v4-flash/fp8_mx/128g/gbs2048/mbs1"]
        assert r.setting("cuda_graph_impl") == "full_iteration"
        assert r.setting("recompute_modules") == ["mla_up_proj"]
        assert graph_scopes(r) == ("full_iteration",)
        assert [(h["call"], h["path"], h["line"]) for h in r.recipe["graph_helpers"]] == [
            ("set_full_iteration_cuda_graph",
             "src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v4.py", 65)]
    # set_cuda_graph_modules (L77-86): Nano's GB300 recipe (nemotronh/gb300/nemotronh.py
    # L381) and Nano's GB200 one, which Lightning's runs (gb200/nemotronh.py L376, L494),
    # capture attention, Mamba and the router - not the whole layer
    for row_id, path, line in (
            ("26.08/gb300/nemotron-3-nano/fp8_mx/8g/gbs512/mbs4", "gb300", 381),
            ("26.08/gb200/nemotron-3.5-lightning/fp8_mx/8g/gbs512/mbs2", "gb200", 376)):
        r = BY_ID[row_id]
        assert r.setting("cuda_graph_impl") == "transformer_engine"
        assert graph_scopes(r) == ("attn", "mamba", "moe_router", "moe_preprocess")
        (h,) = r.recipe["graph_helpers"]
        assert (h["call"], h["path"], h["line"], h["helper"]["line"]) == (
            "set_cuda_graph_modules",
            f"src/megatron/bridge/perf_recipes/nemotronh/{path}/nemotronh.py", line, 77)
    # no helper call is left unexpanded in any row's recipe
    assert not [(r.id, k) for r in BY_ID.values() for k in r.recipe.get("settings") or {}
                if k.startswith("call ") and "cuda_graph" in k]
    # Nemotron 3 Ultra's optimizer instances, the expression its recipe leaves: 256 // 64
    for gpu in ("gb200", "gb300"):
        r = BY_ID[f"26.08/{gpu}/nemotron-3-ultra/fp8_mx/256g/gbs256/mbs1"]
        assert r.setting("num_distributed_optimizer_instances") == 4


def test_recipe_settings_read_at_the_release():
    # scripts/performance/configs/deepseek/workload_base_configs.py at v0.2.0 (25.11):
    # DEEPSEEK_V3_GB200_BASE_CONFIG: PP 4, VP 4, EP 64, hybridep, recompute ["mla_up_proj"]
    r = _one(release="25.11", gpu="gb200", model="deepseek-v3", precision="bf16")
    assert r.recipe["config"] == "DEEPSEEK_V3_GB200_BF16_BASE_CONFIG"
    assert r.setting("moe_flex_dispatcher_backend") == "hybridep"
    assert r.setting("recompute_modules") == ["mla_up_proj"]
    assert r.setting("cuda_graph_impl") == "transformer_engine"
    # the table's GBS 4096 against the recipe's 2048: kept, the table's figure used
    assert r.disagree["gbs"] == {"table": 4096, "recipe": 2048} and r.gbs == 4096


def test_a_recipes_constructed_config_is_read_by_its_literal_arguments():
    # perf_recipes/qwen/common.py L36-61 @ 51885cf1 (26.08): comm_overlap =
    # CommOverlapConfig(tp_comm_overlap=True, overlap_moe_expert_parallel_comm=True, ...)
    r = _one(release="26.08", gpu="gb200", model="qwen3-30b-a3b")
    assert r.recipe["settings"]["comm_overlap"].startswith("expr:CommOverlapConfig(")
    assert r.setting("moe_a2a_overlap") is True
    # one without that argument leaves it unset; an argument that is not a literal is passed over
    r = _one(release="26.08", gpu="gb200", model="gpt-oss-120b")
    assert r.setting("comm_overlap.tp_comm_overlap") is False
    from ledger.validation.bridge import _constructed

    assert _constructed({"c": "expr:C(a=1, b=x, c=[2])", "d": "expr:f"}) == {"c.a": 1, "c.c": [2]}


def test_the_first_launcher_sets_deepseek_v3s_dispatcher_overlap_and_recompute():
    """v0.1.0rc3 scripts/performance/run_script.py L55-95 (25.09): DeepSeek-V3 on H100 with
    DeepEP (the flex dispatcher, recipes/deepseek/deepseek_v3.py L146-149), the combined
    1F1B with delayed weight gradients, recompute of mla_up_proj and mlp; on GB200 moe_act
    recomputed too; B200 neither overlap nor modules of its own."""
    from ledger.render.bridge import config_of, model_of, precision_of

    h = _one(release="25.09", gpu="h100", model="deepseek-v3", precision="fp8_cs")
    model = model_of(h)
    cfg, _ = config_of(h, precision_of(h)[0], model)
    assert (cfg.moe_dispatcher, cfg.ep_backend, cfg.ep_overlap, cfg.delay_wgrad) == \
        ("flex", "deepep", True, True)
    assert (cfg.recompute, cfg.recompute_modules) == ("selective", ("mla_up_proj", "mlp"))
    assert not cfg.shared_expert_overlap
    g = _one(release="25.09", gpu="gb200", model="deepseek-v3", precision="fp8_cs")
    cfg, _ = config_of(g, precision_of(g)[0], model_of(g))
    assert cfg.recompute_modules == ("mla_up_proj", "mlp", "moe_act") and not cfg.ep_overlap
    b = _one(release="25.09", gpu="b200", model="deepseek-v3", precision="fp8_cs")
    cfg, _ = config_of(b, precision_of(b)[0], model_of(b))
    assert cfg.recompute_modules is None and not cfg.ep_overlap and cfg.shared_expert_overlap


def test_the_first_yamls_cuda_graphs_capture_the_whole_layer():
    from ledger.render.bridge_launch import graph_scopes

    # v0.1.0rc3 perf_matrix cuda_graphs: true -> enable_cuda_graph (helpers.py L114-120),
    # Megatron-Core 0.14's whole-layer capture; the token-drop rows' padded MoE with it
    r = _one(release="25.09", gpu="gb200", model="qwen3-235b-a22b", precision="fp8_cs")
    assert r.setting("cuda_graphs") is True and r.model_variant == "tokendrop"
    assert set(graph_scopes(r)) == {"attn", "mlp", "mamba", "moe_router", "moe_preprocess",
                                    "moe"}
    r = _one(release="25.09", gpu="b200", model="llama3-8b", precision="fp8_cs")
    assert "attn" in graph_scopes(r) and "moe" not in graph_scopes(r)
    r = _one(release="25.09", gpu="h100", model="qwen3-30b-a3b")  # cuda_graphs: false
    assert graph_scopes(r) == ()


def test_fp8_attention_is_read_from_the_workload_config_and_the_recipe():
    from ledger.render.bridge import config_of, model_of, precision_of

    # v0.5.1 qwen3_workload_base_configs.py (fp8_dot_product_attention=True, applied as
    # mixed_precision.fp8_dot_product_attention by utils/overrides.py L244-245); the 0.6
    # recipes' own mixed_precision field; the 26.04 rows set neither
    for release, on in (("26.06", True), ("26.08", True), ("26.04", False)):
        r = _one(release=release, gpu="gb300", model="qwen3-30b-a3b")
        prec, _ = precision_of(r)
        cfg, approx = config_of(r, prec, model_of(r))
        assert cfg.fp8_attention is on
        assert not any("FP8 attention" in a for a in approx)  # its saved q, k, v priced
        # the fused grouped MLP the 26.06 / 26.08 recipes run (cutedsl_fused_grouped_mlp,
        # use_transformer_engine_op_fuser) is priced (ledger.step.eager); 26.08's paged
        # stash is named, not priced
        assert cfg.fused_grouped_mlp is on
        assert not any("fused grouped MLP" in a for a in approx)
        assert any("paged stash" in a for a in approx) is (release == "26.08")


def test_moe_flag():
    assert {r.model for r in ROWS if r.moe} <= MOE
    assert not _one(release="26.06", gpu="h100", model="llama3.1-405b").moe


# -- the runner (ledger.render.bridge): every row runs or says why not -------------------

def test_every_row_runs_or_says_why_not():
    from ledger.render.bridge import outcomes

    outs = outcomes()
    assert len(outs) == len(ROWS)
    for o in outs:
        assert o.status in ("ran", "preset missing", "precision missing", "model lacks",
                            "cannot run"), o
        if o.status == "ran":
            assert o.peak_bytes > 0 and o.capacity_bytes > 0 and o.fits is not None
            assert o.tokens_per_s_per_gpu > 0
            assert (o.error is None) == (o.row.tokens_per_s_per_gpu is None)
        else:
            assert o.reason and o.fits is None and o.tokens_per_s_per_gpu is None
    # a model the ledger lacks is never run; a GPU without a preset neither
    assert all(o.status == "model lacks" for o in outs if o.row.model in LACKS)


def test_runner_builds_the_rows_placement():
    from ledger.render.bridge import config_of, model_of, precision_of

    # 26.06 H100 Llama 3.1 405B: TP 8, PP 8, CP 2, VP 8 on 1,024 GPUs, GBS 1536, MBS 1
    r = _one(release="26.06", gpu="h100", model="llama3.1-405b")
    model = model_of(r)
    prec, _ = precision_of(r)
    cfg, _ = config_of(r, prec, model)
    assert (cfg.tp, cfg.pp, cfg.cp, cfg.vp, cfg.dp, cfg.micro_batch) == (8, 8, 2, 8, 8, 1)
    assert cfg.num_microbatches == 1536 // 8 and cfg.zero_stage == 1
    # FP8 current scaling with its FP8 param gather (mixed_precision.py, bf16_with_fp8_current_
    # scaling_mixed: fp8_param_gather True; the perf script turns the BF16 end layers off)
    assert model.seq_len == 8192 and prec == "fp8-tensorwise+param-gather"
    # 25.11 DeepSeek-V3 "(w/o MTP)" drops the MTP module; 26.02 B200 at PP 16 takes
    # Megatron-Bridge's 16-stage layout (4 layers a stage, E first, 1 layer + MTP + L last)
    r = _one(release="25.11", gpu="gb200", model="deepseek-v3", precision="bf16")
    assert r.model_variant == "w/o MTP" and model_of(r).mtp_layers == 0
    r = _one(release="25.11", gpu="b200", model="deepseek-v3")
    assert r.model_variant == "w/ MTP" and model_of(r).mtp_layers == 1
    r = _one(release="26.02", gpu="b200", model="deepseek-v3")
    cfg, _ = config_of(r, "fp8-blockwise", model_of(r))
    assert cfg.stage_layers == (4,) * 15 + (1,) and cfg.pp == 16
    # 25.11 GB200 FP8-MX at PP 8 x VP 4 (the recipe of v0.2.0 has PP 4 x VP 4 and no layout):
    # the 32-stage layout of Megatron-Bridge's 25.09 YAML, "Et|(tt|)*30mL" (w/o MTP: no m)
    r = _one(release="25.11", gpu="gb200", model="deepseek-v3", precision="fp8_mx")
    assert r.layout(0) == ("Et|(tt|)*30L", "Megatron-Bridge's layout map")
    assert r.disagree["pp"] == {"table": 8, "recipe": 4}


def test_benchmark_table_prints_every_group():
    from ledger.render.bridge import bridge_table

    text = bridge_table()
    for group in ("all", "dense", "MoE", "gpu h100", "gpu b200", "family llama3"):
        assert f"  {group} " in text


def test_each_disagreement_is_kept_and_only_those():
    # the one rule: the table's sizes are used; every stated size the recipe sets otherwise
    # is kept in the row, and nothing else is (0.2-0.5 presets and 0.6 recipe functions)
    names = {"global_batch_size": "gbs", "micro_batch_size": "mbs",
             "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
             "context_parallel_size": "cp", "virtual_pipeline_model_parallel_size": "vp",
             "expert_model_parallel_size": "ep"}
    checked = 0
    for r in ROWS:
        s = r.recipe.get("settings") or {}
        for key, f in names.items():
            v = s.get(key, s.get("model." + key, s.get("train." + key)))
            if v is None and f != "vp" or isinstance(v, str):
                continue
            table = getattr(r, f)
            same = (v or 1) == (table or 1) if f == "vp" else v == table
            assert same == (f not in r.disagree), (r.id, f, v, table)
            checked += 1
    assert checked > 1000


def test_rack_over_hgx_ratios_pair_the_published_rows():
    from ledger.render.bridge import outcomes, ratios

    got = {(label, pair): pub for label, pair, pub, _ in ratios(list(outcomes()))}
    if not any(o.row.gpu == "gb300" and o.status == "ran" for o in outcomes()):
        pytest.skip("no gb300 preset on this branch yet")
    # archive, 26.06 DeepSeekV3: DGX-GB300 256 MXFP8 GBS 4096 -> 6338; DGX-B300 -> 3541
    # (the GB300's GBS 15360 row, 6422, is not the B300's twin)
    assert got[("26.06 deepseek-v3 fp8_mx 256g", "gb300/b300")] == pytest.approx(6338 / 3541)
    # 25.09 LLAMA3_8B: DGX-GB200 31357 (29925), DGX-B200 29994 (29388)
    assert got[("25.09 llama3-8b fp8_cs 8g", "gb200/b200")] == pytest.approx(31357 / 29994)
    assert got[("25.09 llama3-8b fp8_mx 8g", "gb200/b200")] == pytest.approx(29925 / 29388)


def test_the_published_out_of_memory_placement():
    from ledger.validation.bridge import did_not_fit

    # archive:288-292: the B200 NVFP4 row ran at TP 2 because "Mapping used for MXFP8
    # precision could not fit for NVFP4 precision": the MXFP8 row's TP 1, EP 64
    (r,) = did_not_fit()
    assert (r.model, r.gpu, r.gpus, r.precision, r.tp, r.ep, r.mbs) == \
        ("nemotron-3-super", "b200", 64, "nvfp4", 1, 64, 1)
    assert r.published_as == "did not fit" and r.tokens_per_s_per_gpu is None
    assert r.source["line"] == 292


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
    recipe's VP 8. The B200 rows' PP 16 with VP unset Megatron accepts (it derives VP 2
    from the layout): they keep the table's cells. Every other row keeps the table's."""
    from ledger.render.bridge import outcomes
    from ledger.validation.bridge import unrunnable_cells
    from ledger.validation.bridge_cells import _layout_refuses

    moved = {r.id: unrunnable_cells(r) for r in ROWS if unrunnable_cells(r)}
    assert moved == {"25.09/gb200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1": {"pp": 4, "vp": 8},
                     "25.09/gb200/deepseek-v3/fp8_cs/256g/gbs2048/mbs1": {"vp": 8}}
    r = BY_ID["25.09/gb200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"]
    run = r.as_run()
    assert (r.pp, r.vp, r.dp) == (8, 2, 32) and (run.pp, run.vp, run.dp) == (4, 8, 64)
    cs = BY_ID["25.09/gb200/deepseek-v3/fp8_cs/256g/gbs2048/mbs1"]
    assert _layout_refuses(cs) and not _layout_refuses(cs.as_run())
    assert (cs.vp, cs.as_run().vp, cs.as_run().layout(1)[0]) == (4, 8, "Et|(tt|)*30mL")
    b = BY_ID["25.09/b200/deepseek-v3/fp8_mx/256g/gbs2048/mbs1"]
    assert (b.pp, b.vp) == (16, None) and not _layout_refuses(b) and b.as_run() is b
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


def test_allocator_setting_per_release_launcher():
    """Expandable segments as each release's perf launch sets PYTORCH_CUDA_ALLOC_CONF: at
    v0.6.0 (26.08) every recipe function's own env_vars turn them on (e.g. perf_recipes/
    nemotronh/gb300/nemotronh.py L149, qwen/gb300/qwen3_moe.py L495); before v0.5 only
    named runs did (a 26.02 H100 Llama 3 70B row runs without)."""
    from ledger.render.bridge import expandable_segments

    v06 = [r for r in ROWS if r.release == "26.08"]
    assert len(v06) == 18 and all(expandable_segments(r) for r in v06)
    r = _one(release="26.02", gpu="h100", model="llama3-70b")
    assert not expandable_segments(r)


def _block_after(page: str, marker: str) -> list[str]:
    import pathlib

    text = (pathlib.Path(__file__).parent.parent / "docs" / page).read_text(encoding="utf-8")
    at = text.index(marker)
    start = text.index("```", at)
    body = text[text.index("\n", start) + 1:text.index("```", start + 3)]
    return [line for line in body.splitlines() if line.strip()]


@pytest.mark.parametrize("page,marker", [
    ("step-time.md", "What the table says, `python benchmarks/bridge.py`"),
    ("systems.md", "`python benchmarks/bridge.py` prints every pair after the rows"),
])
def test_docs_quote_what_bridge_prints(page, marker):
    """Every line the docs quote from benchmarks/bridge.py is a line it prints now."""
    from ledger.render.bridge import bridge_table

    printed = set(bridge_table().splitlines())
    quoted = _block_after(page, marker)
    assert quoted and [line for line in quoted if line not in printed] == []


def test_fp8_cs_rows_run_their_first_and_last_layers_in_fp8_at_every_release():
    """Every release's perf script turns the FP8-CS function's BF16 first / last layers off
    (get_precision_config: scripts/performance/utils/helpers.py L97-100 @ v0.1.0rc3 and
    L37-40 @ v0.2.0, utils/precision.py L28-31 @ v0.3.1); the 25.09 and 25.11 rows were read
    with them on (the generator looked only in precision.py) and priced two or more layers
    in BF16."""
    from ledger.render.bridge import precision_of

    cs = [r for r in rows() if r.precision == "fp8_cs"]
    assert len(cs) >= 40 and {r.release for r in cs} >= {"25.09", "25.11", "26.02.01"}
    for r in cs:
        assert r.precision_setting("first_last_layers_bf16", True) is False, r.id
        over = r.recipe["precision"]["perf_overrides"]
        assert over["first_last_layers_bf16"] is False, r.id
        assert over["path"] == ("scripts/performance/utils/helpers.py"
                                if r.release in ("25.09", "25.11") else
                                "scripts/performance/utils/precision.py"), r.id
        assert "bf16-ends" not in precision_of(r)[0], r.id
