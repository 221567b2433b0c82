"""The flex dispatcher's SMs (ledger.step.ep_sms, ParallelConfig.ep_sms): what an overlapped
all-to-all takes from compute.

Golden figures, copied from their sources:
- DeepEP normal kernels: 20 SMs (deepseek-ai/DeepEP dd758caf deep_ep/buffers/legacy.py L31).
- HybridEP's defaults: ``(num_of_nodes == 1) ? 24 : 8`` for dispatch and combine
  (deepseek-ai/DeepEP 34152ae28f80 csrc/hybrid_ep/config.cuh L315-316, the commit
  Megatron-Bridge v0.5.0-v0.6.0 build, docker/Dockerfile.ci; hybrid-ep branch 94a9f8f6 L366-367),
  num_of_nodes = the group over its ranks per NVLink domain (hybrid_ep_buffer.py L83).
- Megatron-Bridge's perf launcher: moe_hybridep_num_sms = 32 for every HybridEP run
  (scripts/performance/utils/overrides.py L75 @v0.5.1, L89 @v0.6.0)."""
from dataclasses import replace

import pytest

from ledger.config import ParallelConfig
from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
from ledger.render.bridge_launch import ep_sms_of
from ledger.step import estimate
from ledger.step.ep_sms import ep_sm_share, ep_sms
from ledger.system import system
from ledger.validation.bridge import rows


def cfg(ep, backend, **kw):
    return ParallelConfig(tp=1, pp=1, dp=ep, ep=ep, moe_dispatcher="flex", ep_backend=backend,
                          framework="megatron", **kw)


@pytest.mark.parametrize("gpu,ep,backend,sms", [
    ("b300", 8, "deepep", 20), ("b300", 16, "deepep", 20),
    ("b300", 8, "hybridep", 24), ("b300", 16, "hybridep", 8),  # one 8-GPU domain, two
    ("gb200", 64, "hybridep", 24), ("gb200", 72, "hybridep", 24),  # inside the NVL72 rack
    ("gb200", 144, "hybridep", 8)])
def test_defaults_by_backend_and_domain(gpu, ep, backend, sms):
    sysm = system(gpu)
    assert int(ep_sms(cfg(ep, backend), sysm)) == sms
    assert ep_sm_share(cfg(ep, backend), sysm) == pytest.approx(sms / sysm.gpu.sms)


def test_a_launchs_own_count_wins():
    assert ep_sms(cfg(16, "hybridep", ep_sms=32), system("b300")) == 32
    assert ep_sms(cfg(8, "deepep", ep_sms=24), system("b300")) == 24
    assert ep_sm_share(ParallelConfig(tp=1, pp=1, dp=8, ep=8, moe_dispatcher="alltoall",
                                      framework="megatron", ep_sms=32), system("b300")) == 0.0


def test_bridge_rows_take_the_launchers_32_under_hybridep():
    hybrid = [r for r in rows() if r.setting("moe_flex_dispatcher_backend") == "hybridep"]
    deep = [r for r in rows() if r.setting("moe_flex_dispatcher_backend") == "deepep"]
    assert len(hybrid) > 100 and deep
    assert {ep_sms_of(r) for r in hybrid} == {32}
    assert {ep_sms_of(r) for r in deep} <= {None, 20}


def test_more_sms_slow_the_overlapped_step():
    """26.06 GB200 GPT-OSS 120B (HybridEP, the combined 1F1B): its step at the launcher's 32
    SMs is slower than at DeepEP's 20, which the ledger took before."""
    row = next(r for r in rows() if r.id == "26.06/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4")
    model, prec = model_of(row), precision_of(row)[0]
    c = config_of(row, prec, model)[0]
    assert c.ep_sms == 32 and c.ep_overlap

    def step(sms):
        return estimate(model, replace(c, ep_sms=sms), system_of(row), precision=prec,
                        optimizer="adam", tp_overlap=tp_overlap(row)).step_time_s

    assert step(32) > step(20)
