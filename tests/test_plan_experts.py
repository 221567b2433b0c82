"""The planner holds a run's expert grid and token dispatcher (ledger.plan.search.EXPERT_FACTS,
the flex backend and SMs with HOST_FACTS): the grid keeps the candidates Megatron builds
with them (ledger.plan.grid.Held) and prices each, in time and memory, as estimate() prices
that placement (issue 32 must-hold 1, issue 31 must-hold 3)."""
import numpy as np
import pytest

from ledger.config import ParallelConfig
from ledger.frameworks import get as get_framework
from ledger.model import ModelSpec, mixtral_8x7b
from ledger.plan import Pins
from ledger.plan.experts import Held
from ledger.plan.search import _config, _price, enumerate_grid, held_experts, plan
from ledger.step import DEFAULT, estimate
from ledger.system import system

MIXED = ModelSpec(name="mixed", layers=8, hidden=1024, heads=8, kv_heads=4, vocab=32000,
                  seq_len=4096, ffn_hidden=4096, num_experts=16, top_k=4, moe_ffn_hidden=1024,
                  first_dense_layers=2, shared_experts=1)
MEGATRON = get_framework("megatron")


def priced(model, gpus, batch, gpu, facts, finetune=None, precision=None, pins=Pins()):
    sysm = system(gpu)
    g = enumerate_grid(model, gpus, batch, sysm, pins, MEGATRON, finetune,
                       held=held_experts(model, facts))
    return sysm, g, _price(model, sysm, DEFAULT, g, precision, "adam", "megatron",
                           finetune=finetune, facts=facts)


@pytest.mark.parametrize("model,gpus,batch,gpu,facts,precision", [
    # DeepEP across nodes (its RDMA buffer, the forwarded NVLink copies), EP up to 64
    (mixtral_8x7b(), 64, 256, "h100-sxm", {"etp": 1, "moe_dispatcher": "flex"}, None),
    # HybridEP in and across NVL72 racks, the launcher's 32 SMs, Megatron-FSDP's buffers
    (MIXED, 288, 576, "gb200", {"etp": 1, "moe_dispatcher": "flex", "ep_backend": "hybridep",
                                "ep_sms": 32, "fsdp_double_buffer": True}, None),
    # an expert TP above and below tp under the alltoall dispatcher's ETP gathers, FP8
    (MIXED, 32, 64, "h100-sxm", {"etp": 2, "shared_expert_overlap": True}, "fp8-blockwise"),
    (MIXED, 32, 64, "h100-sxm", {"moe_dispatcher": "allgather", "etp": 4}, None),
    # the run's loss and gradient dtype reach the time path too (the loss's traffic, the
    # DP reduction's bytes), as the Bridge recipes set them
    (MIXED, 32, 64, "h100-sxm", {"etp": 1, "moe_dispatcher": "flex", "loss": "te-parallel",
                                 "grad_dtype": "bf16", "dp_bucket_params": 10**6}, None)])
def test_grid_prices_a_held_expert_grid_like_estimate(model, gpus, batch, gpu, facts,
                                                      precision):
    sysm, g, (step, mem, *_) = priced(model, gpus, batch, gpu, facts, precision=precision)
    for i in np.random.default_rng(0).choice(len(step), 25, replace=False):
        cfg = _config(g, i, "megatron", True, precision, None, Pins(), model, facts)
        assert (cfg.etp, cfg.moe_dispatcher) == (facts["etp"], facts.get("moe_dispatcher"))
        est = estimate(model, cfg, sysm, tp_overlap=bool(g["tpov"][i]), precision=precision)
        assert est.step_time_s == pytest.approx(step[i], rel=1e-12), cfg
        assert est.memory_per_gpu_bytes == pytest.approx(mem[i], rel=1e-12), cfg


def test_the_flex_dispatchers_buffers_reach_the_grids_memory():
    """DeepEP's buffers (held flex) are in every row's peak: more than the same grid under
    the alltoall dispatcher, which allocates none."""
    pins = Pins(ep=4)  # the same rows under both (DeepEP drops EP x ETP = 1)
    _, g, (_, flex, *_) = priced(MIXED, 32, 64, "h100-sxm", {"etp": 1, "moe_dispatcher": "flex"},
                                 pins=pins)
    _, g2, (_, a2a, *_) = priced(MIXED, 32, 64, "h100-sxm", {"etp": 1}, pins=pins)
    assert len(g["tp"]) and all(np.array_equal(g[k], g2[k]) for k in g)
    assert (flex > a2a + 32 * 2**20).all()  # at least DeepEP's 32 MiB workspace


def test_holding_what_the_framework_runs_anyway_changes_nothing():
    """Megatron's own dispatcher held, or an etp equal to the pinned tp: the same grid and
    the same figures, to the bit."""
    sysm = system("h100-sxm")
    for pins, facts in ((Pins(), {"moe_dispatcher": "alltoall"}),
                        (Pins(tp=2), {"etp": 2})):
        plain = enumerate_grid(MIXED, 32, 64, sysm, pins, MEGATRON)
        held = enumerate_grid(MIXED, 32, 64, sysm, pins, MEGATRON,
                              held=held_experts(MIXED, facts))
        assert plain.keys() == held.keys()
        assert all(np.array_equal(plain[k], held[k]) for k in plain)
        a = _price(MIXED, sysm, DEFAULT, plain, None, "adam", "megatron")
        b = _price(MIXED, sysm, DEFAULT, held, None, "adam", "megatron", facts=facts)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_the_grid_keeps_what_megatron_builds_with_the_held_experts():
    """ETP x EP tiles one PP stage (parallel_state.py L874-884 @d98e8a64), so at etp 1 EP
    reaches into the TP ranks; an expert TP other than tp runs under SP; the flex
    dispatcher at expert TP 1 only; DeepEP over more than one rank (token_dispatcher.py
    L1836). Every row's config is one ParallelConfig accepts."""
    sysm = system("h100-sxm")
    g = enumerate_grid(MIXED, 32, 64, sysm, Pins(), MEGATRON, held=Held(etp=1))
    stage = g["tp"] * g["cp"] * g["dp"]
    assert (stage % g["ep"] == 0).all() and ((g["dp"] * g["cp"]) % g["ep"] != 0).any()
    assert g["sp"][g["tp"] > 1].all()
    flex = enumerate_grid(MIXED, 32, 64, sysm, Pins(), MEGATRON, held=Held(dispatcher="flex"))
    assert (flex["tp"] == 1).all() and (flex["ep"] > 1).all()
    hybrid = enumerate_grid(MIXED, 32, 64, sysm, Pins(), MEGATRON,
                            held=Held(dispatcher="flex", backend="hybridep"))
    assert (hybrid["ep"] == 1).any()  # HybridEP asserts nothing of the kind
    for grid, facts in ((g, {"etp": 1}), (flex, {"moe_dispatcher": "flex"})):
        for i in np.random.default_rng(0).choice(len(grid["tp"]), 200, replace=False):
            assert isinstance(_config(grid, i, "megatron", True, None, None, Pins(), MIXED,
                                      facts), ParallelConfig)


def test_torchtitan_holds_no_other_expert_tp():
    """Only Megatron's dispatcher starts from the SP shard (Framework.moe_tokens_sp_shard):
    elsewhere an expert TP other than tp keeps only the candidates whose tp it equals."""
    g = enumerate_grid(MIXED, 32, 64, system("h100-sxm"), Pins(), get_framework("torchtitan"),
                       held=Held(etp=2))
    assert len(g["tp"]) and (g["tp"] == 2).all()


def test_plan_ranks_a_flex_run():
    r = plan(mixtral_8x7b(), 64, system("h100-sxm"), 256, top=3,
             facts={"etp": 1, "moe_dispatcher": "flex", "ep_backend": "hybridep"})
    assert r.plans and {(p.config.etp, p.config.moe_dispatcher, p.config.ep_backend)
                        for p in r.plans} == {(1, "flex", "hybridep")}


BRIDGE_ROWS = (  # Megatron-Bridge performance rows (ledger.validation.bridge)
    "26.04.01/gb200/nemotron-3-super/nvfp4/64g/gbs512/mbs1",  # tp 2, etp 1, HybridEP EP 64
    "26.02.01/h100/qwen3-235b-a22b/fp8_cs/256g/gbs8192/mbs1",  # tp 2, etp 1, DeepEP across nodes
    "25.11/h100/qwen3-235b-a22b/fp8_cs/256g/gbs2048/mbs1",  # tp 2, etp 1, alltoall
    "26.04.01/b300/gpt-oss-120b/bf16/64g/gbs1280/mbs4",  # BF16 gradients
    "26.08/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4")  # the TE loss, CUDA graphs


@pytest.mark.parametrize("row_id", BRIDGE_ROWS)
def test_the_planner_ranks_a_bridge_recipe_as_report_prices_it(row_id):
    """Issue 31 must-hold 3: a published recipe the ledger says fits is one the planner
    ranks - pinned to the recipe's placement, with its run facts held (its dispatcher, etp,
    flex backend and SMs, loss, dtypes, buffers), the planner's row is report's memory and
    estimate's step time."""
    from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
    from ledger.validation.bridge import rows
    from ledger.placement import place
    from ledger.plan.search import DTYPE_FACTS, EXPERT_FACTS, HOST_FACTS, RUN_FACTS

    row = next(r for r in rows() if r.id == row_id)
    model, precision = model_of(row), precision_of(row)[0]
    c, sysm = config_of(row, precision, model)[0], system_of(row)
    from ledger.plan.search import BUFFER_FACTS as BUFFERS
    held = RUN_FACTS + HOST_FACTS + EXPERT_FACTS + DTYPE_FACTS + BUFFERS
    pins = Pins(tp=c.tp, pp=c.pp, cp=c.cp, dp=c.dp, ep=c.ep, vp=c.vp, zero=c.zero_stage,
                micro_batch=c.micro_batch, recompute=c.recompute, schedule=c.schedule,
                ep_overlap=c.ep_overlap, overlap_grad_reduce=c.overlap_grad_reduce,
                overlap_param_gather=c.overlap_param_gather,
                tp_overlap=tp_overlap(row) and c.tp > 1)
    report = max(m.required_bytes for m in place(  # what report's verdict reads
        model, c, precision=precision, gpu=sysm.gpu, gpus_per_node=sysm.gpus_per_node,
        gpus_per_domain=sysm.gpus_per_domain, nvls=sysm.nvls).memory_by_rank)
    assert report <= sysm.gpu.hbm_bytes  # report: it fits
    best = plan(model, c.world, sysm, c.micro_batch * c.num_microbatches * c.dp, top=1,
                pins=pins, precision=precision, headroom_bytes=0,
                facts={k: getattr(c, k) for k in held}).plans[0]
    assert (best.config.etp, best.config.moe_dispatcher, best.config.ep_sms) == \
        (c.etp, c.moe_dispatcher, c.ep_sms)
    assert best.memory_bytes == pytest.approx(report, rel=1e-9)
    est = estimate(model, c, sysm, tp_overlap=tp_overlap(row), precision=precision)
    assert best.step_time_s == pytest.approx(est.step_time_s, rel=1e-9)
