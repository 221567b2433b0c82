"""The Megatron-Bridge runner (ledger.render.bridge): every row runs or says why not, with
its recipe's placement, allocator setting and FP8 layers; the benchmark table, its
disagreements and ratios, the published out-of-memory placement, and the docs quoting what
it prints."""
import pytest

from ledger.validation.bridge import LACKS, rows
from test_bridge import BY_ID, ROWS, _one

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


def test_a_recipes_recompute_num_layers_runs_block_recompute_of_that_many_layers():
    """The perf scripts turn a workload config's recompute_num_layers into full recompute,
    method block, of that many layers (set_recompute_overrides: scripts/performance/utils/
    helpers.py L174-177 @ v0.2.0, utils/overrides.py L137-140 @ v0.3.0): 25.11's H100
    Llama 3 8B FP8-CS (LLAMA3_8B_H100_FP8_CS_BASE_CONFIG, workload_base_configs.py L229-233
    @ v0.2.0: 5 layers) ran it; every other row's recipe sets none."""
    from ledger.render.bridge import config_of, model_of, precision_of

    with_layers = [r for r in ROWS if r.setting("recompute_num_layers")]
    assert [r.id for r in with_layers] == ["25.11/h100/llama3-8b/fp8_cs/8g/gbs128/mbs1"]
    row = with_layers[0].as_run()
    cfg, _ = config_of(row, precision_of(row)[0], model_of(row))
    assert (cfg.recompute, cfg.recompute_layers) == ("full", 5)
    other = _one(release="25.09", gpu="h100", model="llama3-8b").as_run()
    cfg, _ = config_of(other, precision_of(other)[0], model_of(other))
    assert (cfg.recompute, cfg.recompute_layers) == ("none", None)


def test_recipe_functions_that_turn_the_param_gather_overlap_off():
    """Megatron-Bridge 0.2.0's MXFP8 functions turn --overlap-param-gather off ("keeping
    this eanbled causes NaN grad norm": configs/llama31/llama31_llm_pretrain.py L140-143
    @ v0.2.0) and 0.4.2's GB200 Llama 3.1 405B NVFP4 V2 (L123-124 @ v0.4.2); the rows that
    ran them are priced without it, their twins and every other row with it (DP > 1)."""
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.render.bridge_launch import overlap_param_gather

    off = {r.id for r in ROWS if not overlap_param_gather(r)}
    assert off == {"25.11/b200/llama3.1-405b/fp8_mx/128g/gbs64/mbs1",
                   "25.11/b200/qwen3-235b-a22b/fp8_mx/64g/gbs1024/mbs1",
                   "25.11/gb200/deepseek-v3/fp8_mx/256g/gbs4096/mbs1",
                   "25.11/gb300/deepseek-v3/fp8_mx/256g/gbs4096/mbs1",
                   "26.04.01/gb200/llama3.1-405b/nvfp4/256g/gbs1536/mbs1",
                   "26.06/gb200/llama3.1-405b/nvfp4/256g/gbs1536/mbs1"}
    for rid, want in (("25.11/b200/llama3.1-405b/fp8_mx/128g/gbs64/mbs1", False),
                      ("25.11/b200/llama3.1-405b/fp8_cs/128g/gbs64/mbs1", True),
                      ("26.04.01/gb200/llama3.1-405b/nvfp4/256g/gbs1536/mbs1", False),
                      ("26.04.01/gb200/llama3.1-405b/fp8_mx/256g/gbs1536/mbs1", True)):
        row = BY_ID[rid].as_run()
        cfg, _ = config_of(row, precision_of(row)[0], model_of(row))
        assert (cfg.overlap_param_gather, cfg.overlap_grad_reduce) == (want, True), rid


@pytest.mark.parametrize("method, want", [(None, ("full", 5, 1)), ("block", ("full", 5, 1)),
                                          ("uniform", ("full", None, 5))])
def test_recompute_num_layers_is_read_with_its_method(monkeypatch, method, want):
    """recompute_num_layers is block recompute of that many layers where the method is
    unset (set_recompute_overrides sets block) or block; beside a recipe's
    recompute_method uniform it is Megatron's uniform: groups of that many layers, as the
    CLI reads --recompute-method uniform."""
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import BridgeRow

    row = _one(release="25.11", gpu="h100", model="llama3-8b", precision="fp8_cs").as_run()
    own = BridgeRow.setting
    monkeypatch.setattr(BridgeRow, "setting", lambda self, name, default=None: method
                        if name == "recompute_method" else own(self, name, default))
    cfg, _ = config_of(row, precision_of(row)[0], model_of(row))
    assert (cfg.recompute, cfg.recompute_layers, cfg.recompute_group) == want


@pytest.mark.parametrize("key, value, want", [
    ("comm_overlap.overlap_param_gather", False, False),
    ("comm_overlap.overlap_param_gather", True, True),
    ("ddp.overlap_param_gather", False, True)])
def test_an_unconditional_param_gather_overlap_setting(monkeypatch, key, value, want):
    """A recipe's own comm_overlap.overlap_param_gather wins over CommOverlapConfig's DP > 1
    default (comm_overlap.py L594-600 @ v0.6.0); a ddp.overlap_param_gather alone is
    overwritten by it under the distributed optimizer (L636-643), so read as on."""
    from ledger.render.bridge_launch import overlap_param_gather
    from ledger.validation.bridge import BridgeRow

    row = _one(release="25.11", gpu="h100", model="llama3-8b", precision="fp8_cs")
    assert overlap_param_gather(row)
    own = BridgeRow.setting
    monkeypatch.setattr(BridgeRow, "setting", lambda self, name, default=None: value
                        if name == key else own(self, name, default))
    assert overlap_param_gather(row) is want
