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
    (MIXED, 32, 64, "h100-sxm", {"moe_dispatcher": "allgather", "etp": 4}, None)])
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
