"""Transformer Engine's fused grouped MLP for the routed experts (``ledger.step.eager``:
Megatron-Core's use_transformer_engine_op_fuser, moe/experts.py L286-291 @d98e8a64, with
TE's CuTe DSL kernels, ops/fused/grouped_mlp.py @d0067d0d): where TE takes the kernel (an
sm_10x GPU, MXFP8 / NVFP4, ETP 1) the activation rides the grouped GEMMs' epilogues,
so the experts' activation bytes carry no elementwise traffic and gpt-oss's eager clamp
and fc2-bias passes do not run; elsewhere the flag changes nothing priced."""
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.io.hf.reader import read_hf_config
from ledger.model import preset
from ledger.parallel import ParallelConfig
from ledger.placement import routed_activation_bytes
from ledger.step import DEFAULT, estimate
from ledger.step.eager import expert_pass_bytes, fused_grouped_mlp
from ledger.step.recompute import written_dtype
from ledger.system import system

ROOT = Path(__file__).parents[1]
MX = "fp8-mxfp8"


def _gpt_oss():
    model, _ = read_hf_config(ROOT / "examples" / "gpt-oss-120b.json")
    return replace(model, seq_len=4096)


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 64, "ep": 64, "micro_batch": 4,
                             "num_microbatches": 5, "zero_stage": 1, "precision": MX, **kw})


def test_where_te_takes_the_fused_kernel():
    m, gb200 = _gpt_oss(), system("gb200").gpu
    assert fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True), gb200)
    assert fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True), system("gb300").gpu)  # sm_103
    assert not fused_grouped_mlp(m, _cfg(), gb200)  # the op fuser off
    # Hopper (sm_90): TE keeps GroupedLinear, activation, GroupedLinear apart
    assert not fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True), system("h100-sxm").gpu)
    # FP8 current scaling: not a block-scaled recipe (grouped_mlp.py L842)
    assert not fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True, precision="fp8-tensorwise"),
                                 gb200)
    assert not fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True, precision=None), gb200)
    # Megatron-Core's fused impl needs an expert TP group of 1 (experts.py L397-398, its
    # tp_group the expert TP group, L210): TP 2 with ETP 1 runs it, ETP 2 does not
    assert fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True, tp=2, dp=32, ep=32, etp=1,
                                     sequence_parallel=True), gb200)
    assert not fused_grouped_mlp(m, _cfg(fused_grouped_mlp=True, tp=2, dp=32, ep=32,
                                         sequence_parallel=True), gb200)  # ETP = TP
    assert not fused_grouped_mlp(preset("llama3-8b"), _cfg(fused_grouped_mlp=True, ep=1),
                                 gb200)  # no experts


def test_routed_activation_bytes_by_hand():
    # gpt-oss, 4 x 4096 tokens, top-4, F = 2880, every layer MoE: Megatron's gated experts
    # keep fc1's 2F output in BF16 and fc2's F-wide input as MXFP8 (1 + 1/32 B)
    got = routed_activation_bytes(_gpt_oss(), _cfg())
    assert got == pytest.approx(16384 * 4 * 2880 * (2 * 2 + 1.03125))
    assert routed_activation_bytes(preset("llama3-8b"), _cfg(ep=1)) == 0.0


def test_the_fused_kernel_drops_the_eager_passes():
    m, gb200 = _gpt_oss(), system("gb200").gpu
    assert expert_pass_bytes(m, _cfg(), 16384, gb200)[0] > 0
    assert expert_pass_bytes(m, _cfg(fused_grouped_mlp=True), 16384, gb200) == (0.0, 0.0)
    # on a GPU TE does not take it on, the eager passes stay
    h100 = system("h100-sxm").gpu
    assert expert_pass_bytes(m, _cfg(fused_grouped_mlp=True), 16384, h100) \
        == expert_pass_bytes(m, _cfg(), 16384, h100)


def test_elementwise_falls_by_the_activation_bytes_and_the_passes():
    sysm = system("gb200")
    m = _gpt_oss()
    a = estimate(m, _cfg(), sysm, precision=MX, optimizer="adam")
    b = estimate(m, _cfg(fused_grouped_mlp=True), sysm, precision=MX, optimizer="adam")
    # 36 layers x 5 micro-batches x (forward + twice it backward): the fitted traffic on
    # the activation bytes, and the eager passes at the HBM rate, both directions
    hbm = sysm.gpu.hbm_bytes_per_s
    # at the BF16 bytes the epilogues stand in for (step.recompute.written_dtype): fc2's
    # input counts as the activation dtype's, not its MXFP8 copy's
    act = 36 * 5 * 3 * DEFAULT.elementwise_traffic * routed_activation_bytes(
        m, written_dtype(_cfg())) / hbm
    assert routed_activation_bytes(m, written_dtype(_cfg())) == pytest.approx(
        16384 * 4 * 2880 * (2 * 2 + 2))
    passes = 36 * 5 * sum(expert_pass_bytes(m, _cfg(), 16384, sysm.gpu)) / hbm
    assert a.breakdown["elementwise"] - b.breakdown["elementwise"] == pytest.approx(
        act + passes, rel=1e-9)
    assert a.breakdown["compute"] == b.breakdown["compute"]  # the GEMMs as before
    assert a.memory_per_gpu_bytes == b.memory_per_gpu_bytes  # the same tensors kept
    cdna = system("mi355x")  # MXFP8 on a GPU that is not sm_10x: nothing moves
    assert estimate(m, _cfg(), cdna, precision=MX, optimizer="adam").step_time_s == \
        estimate(m, _cfg(fused_grouped_mlp=True), cdna, precision=MX,
                 optimizer="adam").step_time_s


def test_bridge_rows_with_the_op_fuser_price_it():
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    fused = [r for r in rows() if r.moe and True in (
        r.setting("cutedsl_fused_grouped_mlp"), r.setting("use_transformer_engine_op_fuser"))]
    assert len(fused) >= 20
    for r in fused:
        r = r.as_run()
        prec, _ = precision_of(r)
        cfg, approx = config_of(r, prec, model_of(r))
        assert cfg.fused_grouped_mlp
        assert not any("op fuser" in a for a in approx), r.id


def test_the_regressed_dglu_kernel_as_its_fix_measured_it():
    # cudnn-frontend PR #322 at the shape: dGLU with dbias 1362.768 us before the
    # fix, 155.632 us after; the kernel is fc2's input-gradient GEMM: a third of a gated
    # expert's forward GEMM FLOPs (fc1 2F wide, fc2 F)
    from ledger.step.eager import dglu_regression_s

    m, gb200 = _gpt_oss(), system("gb200").gpu
    on = _cfg(fused_grouped_mlp=True, dglu_dbias_regression=True)
    assert dglu_regression_s(m, on, gb200, 3.0) == pytest.approx(1362.768 / 155.632 - 1)
    assert dglu_regression_s(m, _cfg(fused_grouped_mlp=True), gb200, 3.0) == 0.0
    assert dglu_regression_s(m, _cfg(dglu_dbias_regression=True), gb200, 3.0) == 0.0  # unfused
    # without an fc1 bias the kernel skips dbias: the regression is dbias's (PR #322:
    # 139.392 / 138.960 us without it)
    assert dglu_regression_s(replace(m, mlp_bias=False), on, gb200, 3.0) == 0.0
    sysm = system("gb200")
    a = estimate(m, _cfg(fused_grouped_mlp=True), sysm, precision=MX, optimizer="adam")
    b = estimate(m, on, sysm, precision=MX, optimizer="adam")
    assert b.step_time_s > a.step_time_s and b.breakdown["elementwise"] == \
        a.breakdown["elementwise"]


def test_only_rows_whose_table_names_the_regression_take_it():
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    taken = []
    for r in rows():
        if not r.moe:
            continue
        r = r.as_run()
        prec, _ = precision_of(r)
        cfg, _ = config_of(r, prec, model_of(r))
        if cfg.dglu_dbias_regression:
            taken.append(r.id)
            assert any("cudnn-frontend/issues/256" in n for n in r.notes)
    # docs/performance-summary-archive.md L57-58 @067f987d: the two 26.06.01 gpt-oss rows
    assert sorted(taken) == ["26.06.01/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4",
                             "26.06.01/gb300/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4"]


def test_estimate_takes_the_flag():
    import json as _json

    from test_bad_input import run

    argv = ["estimate", str(ROOT / "examples" / "gpt-oss-120b.json"), "--gpu", "gb200",
            "--gpus", "64", "--ep", "64", "--global-batch", "1280", "--micro-batch", "4",
            "--precision", "fp8", "--fp8-recipe", "mxfp8", "--json"]
    runs = []
    for extra in ([], ["--fused-grouped-mlp"]):
        code, out, err = run(argv + extra)
        assert code == 0, err
        runs.append(_json.loads(out))
    assert runs[1]["config"]["fused_grouped_mlp"] and not runs[0]["config"]["fused_grouped_mlp"]
    assert runs[1]["step_time_s"] < runs[0]["step_time_s"]


def test_the_planner_holds_it_and_prices_it_on_its_grid():
    """The planner holds the launch fact and prices it: DeepSeek-V3 in MXFP8 on 256 GB200
    (GPU-bound - on a host-bound placement such as Qwen3-30B-A3B on 8 GB200 the host's
    seconds it saves sit under the expert GEMMs, and the step does not move)."""
    from ledger.plan.search import plan

    m, gb200 = replace(preset("deepseek-v3"), seq_len=4096), system("gb200")
    off, on = (plan(m, 256, gb200, 2048, top=1, precision=MX,
                    facts={"fused_grouped_mlp": f}).plans[0] for f in (False, True))
    assert on.config.fused_grouped_mlp and not off.config.fused_grouped_mlp
    assert on.step_time_s < off.step_time_s


def test_a_bridge_row_fuses_only_in_a_recipe_its_release_te_fuses():
    # TE 4220403e (Megatron-Bridge v0.5.0) fuses the grouped MLP in MXFP8 alone (ops/_common.py
    # L245); b9d690e0 (v0.5.1) and 4329ff84 (v0.6.0) in NVFP4 too (#3048). The same 26.06
    # MXFP8 row read as NVFP4: per-expert GroupedLinear at v0.5.0, fused at v0.5.1 / v0.6.0
    from ledger.render.bridge import config_of, model_of
    from ledger.step.host import local_experts
    from ledger.validation.bridge import rows
    from ledger.validation.bridge_stack import te_fused_mlp

    assert te_fused_mlp(replace(rows()[0], recipe={"ref": "v0.4.2"})) == ()
    row = next(r for r in rows() if r.recipe.get("ref") == "v0.5.0" and r.moe
               and r.setting("cutedsl_fused_grouped_mlp") is True).as_run()
    model, gpu = model_of(row), system(row.gpu).gpu
    cfg, _ = config_of(row, MX, model)
    assert cfg.fused_grouped_mlp and local_experts(model, cfg, gpu) == 0
    fp4, _ = config_of(row, "fp4-nvfp4", model)
    assert not fp4.fused_grouped_mlp
    assert local_experts(model, fp4, gpu) == model.num_experts / row.ep
    for ref in ("v0.5.1", "v0.6.0"):
        later = replace(row, recipe={**row.recipe, "ref": ref})
        assert config_of(later, "fp4-nvfp4", model)[0].fused_grouped_mlp
