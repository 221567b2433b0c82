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


def test_a_helper_called_with_keywords_sets_what_the_call_passes():
    """tools/bridge_recipes.py binds an expanded helper's parameters to the call's literal
    arguments (``bound``): 0.6's DeepSeek-V3 MXFP8 recipes call
    _enable_deepseek_full_iteration_mxfp8(cfg, fp8_dot_product_attention=True,
    fp8_output_proj=True) on GB300 (perf_recipes/deepseek/gb300/deepseek_v3.py L157 @
    v0.6.0) and with fp8_output_proj=True alone on GB200 (gb200/deepseek_v3.py L160), whose
    body assigns both fields from its parameters, fp8_dot_product_attention defaulting to
    False (common.py L49-82); _benchmark_common's cross_entropy_impl default "te" and
    Nemotron 3 Ultra's builder arguments (EP 64, GBS 256) likewise."""
    from ledger.render.bridge import config_of, model_of, precision_of

    for gpu, dpa in (("gb300", True), ("gb200", False)):
        r = _one(release="26.08", gpu=gpu, model="deepseek-v3")
        assert r.recipe["settings"]["model.fp8_output_proj"] is True
        assert r.recipe["settings"]["mixed_precision.fp8_dot_product_attention"] is dpa
        assert r.setting("cross_entropy_fusion_impl") == "te"
        cfg, _ = config_of(r, precision_of(r)[0], model_of(r))
        assert cfg.fp8_attention is dpa
    r = _one(release="26.08", gpu="gb300", model="nemotron-3-ultra")
    got = r.recipe["settings"]
    assert (got["model.expert_model_parallel_size"], got["train.global_batch_size"]) == (64, 256)
    assert "ep" not in r.disagree and "gbs" not in r.disagree
    # no row's recipe keeps a parameter of a helper it expanded as an expression
    left = {(r.id, k) for r in ROWS for k, v in (r.recipe.get("settings") or {}).items()
            if v in ("expr:fp8_output_proj", "expr:fp8_dot_product_attention",
                     "expr:cross_entropy_impl")}
    assert not left


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


def test_the_25_09_b200_qwen3_30b_row_takes_the_tables_pp_1_not_the_recipes_pp_8_vp_12():
    """Table over recipe where they disagree (``rule()``), checked where it matters most:
    v0.1.0rc3's perf_matrix b200 entry says PP 8, VP 12 (qwen3_30b_a3b_llm_pretrain.yaml
    L92-103), which cannot split Qwen3-30B's 48 layers (8 x 12 = 96 virtual stages;
    Megatron-Core refuses it as the ledger does), so that recipe never ran; the table's
    GA 64 = GBS 512 / (DP 8 x MBS 1) says PP 1, and the r0.1.0 branch's "Cherry pick perf
    2509 (#959)" (a2884419, 2025-10-15, tag v0.1.0rc4) sets pp: 1, vp: null there."""
    from ledger.errors import LedgerError
    from ledger.parallel import ParallelConfig, place
    from ledger.render.bridge import config_of, model_of, precision_of

    r = _one(release="25.09", gpu="b200", model="qwen3-30b-a3b", precision="fp8_cs")
    assert r.disagree == {"pp": {"table": 1, "recipe": 8}, "vp": {"table": None, "recipe": 12}}
    m = model_of(r)
    with pytest.raises(LedgerError) as e:
        place(m, ParallelConfig(pp=8, vp=12, dp=1, ep=1, num_microbatches=512))
    assert e.value.field == "layers"
    cfg, _ = config_of(r.as_run(), precision_of(r)[0], m)
    assert (cfg.pp, cfg.dp, cfg.ep, cfg.micro_batch, cfg.num_microbatches) == (1, 8, 8, 1, 64)
    assert r.ga == 64 == r.gbs // (cfg.dp * cfg.micro_batch)
    # and what the recipe ran besides: drop-and-pad at capacity factor 1.0 (run_script.py
    # L97-102, moe_token_drop.py L18-21) under the whole-layer graphs, nothing recomputed
    assert cfg.moe.pad_to_capacity and cfg.moe.capacity_factor == 1.0
    assert cfg.cuda_graph_local and "moe" in cfg.cuda_graph and cfg.recompute == "none"


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
        # use_transformer_engine_op_fuser) is priced (ledger.step.eager); so is 26.08's
        # paged stash (ledger.frameworks.paged_stash)
        assert cfg.fused_grouped_mlp is on
        assert not any("fused grouped MLP" in a or "paged stash" in a for a in approx)
        assert (cfg.paged_stash is not None) is (release == "26.08")


def test_moe_flag():
    assert {r.model for r in ROWS if r.moe} <= MOE
    assert not _one(release="26.06", gpu="h100", model="llama3.1-405b").moe
