"""The planner holds Megatron's CPU activation offload (--cpu-offloading-num-layers) as
report prices it (ledger.placement.layers: those layers' activations on the host), in
every candidate, and searches only the placements Megatron runs it in - no pipeline
parallelism, no recompute (transformer_config.py L1884-1899 @d98e8a64;
ledger.plan.search.offload_pins). NVIDIA's GB300 Llama 3 70B FP8-CS recipe runs it (20
layers, Megatron-Bridge's table at MBS 2): report judges it to fit, and the planner, pinned
to its placement, must rank it at report's bytes (issue 31: "a published recipe the ledger
says fits is one the planner can rank")."""
from dataclasses import replace

import pytest

from ledger.errors import LedgerError
from ledger.plan import Pins, plan
from ledger.plan.search import EXPERT_FACTS, HOST_FACTS, RUN_FACTS, offload_pins
from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
from ledger.plan.search import BUFFER_FACTS as BUFFERS
from ledger.step import estimate
from ledger.validation.bridge import rows
from test_cli import run

ROW = "26.04.01/gb300/llama3-70b/fp8_cs/64g/gbs256/mbs2"


def _pinned(offload: bool):
    r = next(x for x in rows() if x.id == ROW).as_run()
    model, prec = model_of(r), precision_of(r)[0]
    cfg, sysm = config_of(r, prec, model)[0], system_of(r)
    assert cfg.offload_activation_layers == 20 and cfg.pp == 1 and cfg.recompute == "none"
    facts = {k: getattr(cfg, k) for k in RUN_FACTS + HOST_FACTS + EXPERT_FACTS + BUFFERS}
    if not offload:
        facts["offload_activation_layers"] = 0
    pins = Pins(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, ep=cfg.ep, zero=cfg.zero_stage,
                micro_batch=cfg.micro_batch, recompute="none",
                overlap_grad_reduce=cfg.overlap_grad_reduce,
                overlap_param_gather=cfg.overlap_param_gather, tp_overlap=False)
    res = plan(model, cfg.world, sysm, cfg.micro_batch * cfg.num_microbatches * cfg.dp,
               pins=pins, precision=prec, facts=facts, headroom_bytes=0)
    est = estimate(model, cfg, sysm, precision=prec, tp_overlap=tp_overlap(r))
    return res, est


def test_the_recipe_is_ranked_at_reports_bytes_and_estimates_step():
    res, est = _pinned(offload=True)
    assert est.fits and res.fitting >= 1
    top = res.plans[0]
    assert (top.config.pp, top.config.recompute) == (1, "none")
    assert top.memory_bytes == pytest.approx(est.memory_per_gpu_bytes, rel=1e-9)
    assert top.step_time_s == pytest.approx(est.step_time_s, rel=1e-9)


def test_without_the_offload_the_same_placement_does_not_fit():
    res, est = _pinned(offload=False)
    assert res.fitting == 0 and res.shortfall_bytes > 0


def test_pins_against_megatrons_rule_are_refused():
    assert offload_pins(Pins(), 0) == Pins()
    assert offload_pins(Pins(tp=2), 4) == Pins(tp=2, pp=1, recompute="none")
    for bad in (Pins(pp=2), Pins(recompute="full")):
        with pytest.raises(LedgerError, match="offload_activation_layers"):
            offload_pins(bad, 4)


def test_the_cli_holds_it_and_refuses_a_pipeline_pin_in_one_line(capsys):
    base = ["plan", "llama3-8b", "--gpus", "8", "--gpu", "h100-sxm", "--global-batch", "64",
            "--cpu-offloading-num-layers", "8"]
    code, out, err = run(capsys, *base, "--json")
    assert code == 0, err
    import json
    plans = json.loads(out)["plans"]
    assert plans and {(p["pp"], p["recompute"]) for p in plans} == {(1, "none")}
    code, out, err = run(capsys, *base, "--pp", "2")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: offload_activation_layers: ") and "pp(2)" in err


@pytest.mark.parametrize("rid", ["26.06.01/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4",
                                 "26.06.01/gb300/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4",
                                 ROW, "26.04/gb200/nemotron-3-super/nvfp4/64g/gbs512/mbs1"])
def test_plan_pinned_to_a_bridge_row_equals_estimate_and_report(rid):
    """benchmarks/plan_agrees.py's comparison (ledger.render.plan_agrees) on the rows it last found apart: the two
    gpt-oss rows whose table declares the dGLU-dbias regression (step.eager; plan held no
    such fact: -30% step), the offloading Llama 3 70B row, and a Blackwell row whose
    container's torch sets PyTorch's cuBLAS workspace (bridge_stack.torch_workspace_of; plan
    held no such fact: up to +4.6e-4 of memory on 86 rows)."""
    from ledger.render.plan_agrees import compare

    r = next(x for x in rows() if x.id == rid).as_run()
    step, memory = compare(r)
    assert abs(step) < 1e-9 and abs(memory) < 1e-9
