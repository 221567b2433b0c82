"""Transformer Engine's GEMM workspace by the GPU's generation (issue 31): 32 MiB + 1 KiB
from compute capability 9 (Hopper, Blackwell), 4 MiB before it (TE d0067d0d
transformer_engine/pytorch/cpp_extensions/gemm.py L40-45) - on the per-rank path, the
planner's grid, and held to Megatron-LM's goldens on A100 and H100."""
import numpy as np
import pytest

from ledger.frameworks import get as get_framework
from ledger.model import llama3_8b, mixtral_8x7b
from ledger.parallel import ParallelConfig, place
from ledger.plan import Pins, enumerate_grid
from ledger.plan.search import _config, _price
from ledger.step import DEFAULT, estimate
from ledger.system import GPUS, system
from ledger.validation.memory import peaks, predicted

TE_SM90_BYTES = 32 * 1024 * 1024 + 1024  # gemm.py L42-44 @d0067d0d: major >= 9
TE_BEFORE_BYTES = 4_194_304  # gemm.py L45: every other architecture


@pytest.mark.parametrize("gpu,workspace", [
    ("a100-80gb", TE_BEFORE_BYTES), ("l40s", TE_BEFORE_BYTES), ("l4", TE_BEFORE_BYTES),
    ("h100-sxm", TE_SM90_BYTES), ("h200", TE_SM90_BYTES), ("b200", TE_SM90_BYTES),
    ("gb300", TE_SM90_BYTES), ("rtx-pro-6000", TE_SM90_BYTES)])
def test_report_names_tes_workspace_at_its_size_on_the_gpu(gpu, workspace):
    """One workspace on a dense model's rank, one per compute stream more (4, TE
    multi_stream.cpp L52-55) where grouped GEMMs run the routed experts."""
    dense = place(llama3_8b(), ParallelConfig(tp=2, dp=4), gpu=GPUS[gpu])
    assert dict(dense.memory.named)["cuBLAS workspace"] == workspace
    moe = place(mixtral_8x7b(), ParallelConfig(tp=2, dp=4, ep=4), gpu=GPUS[gpu])
    assert dict(moe.memory.named)["cuBLAS workspace"] == 5 * workspace


def test_megatron_goldens_bear_the_workspace_between_a100_and_h100():
    """gpt3_7b_tp4_pp1_memory_speed (bf16, no gradient-accumulation fusion: no dummy
    wgrads): what stays allocated after the step on H100 less on A100 is 29,415,424 B in
    Megatron-LM's goldens (d98e8a64) - TE's 32 MiB + 1 KiB less 4 MiB (29,361,152) and
    54 KiB; the ledger's difference is TE's exactly (the same config on both)."""
    rows = {r.label: r for r in peaks()}
    h100 = rows["gpt3_7b_tp4_pp1_memory_speed dgx_h100 after step"]
    a100 = rows["gpt3_7b_tp4_pp1_memory_speed dgx_a100 after step"]
    assert h100.measured - a100.measured == 29_415_424
    assert predicted(h100) - predicted(a100) == TE_SM90_BYTES - TE_BEFORE_BYTES
    assert predicted(h100) - predicted(a100) == pytest.approx(
        h100.measured - a100.measured, rel=0.002)


def test_planner_grid_prices_the_workspace_as_report_does():
    """Megatron on A100: the grid's framework buffers take the GPU's generation too."""
    sysm, fw = system("a100-80gb"), get_framework("megatron")
    g = enumerate_grid(llama3_8b(), 16, 64, sysm, Pins(), fw)
    g = {k: v[np.isin(g["zero"], fw.zero_stages)] for k, v in g.items()}
    _, mem, *_ = _price(llama3_8b(), sysm, DEFAULT, g, None, "adam", "megatron")
    for i in np.random.default_rng(0).choice(len(mem), 8, replace=False):
        est = estimate(llama3_8b(), _config(g, i, "megatron", True, None, None, Pins(),
                                            llama3_8b()), sysm, tp_overlap=bool(g["tpov"][i]))
        assert est.memory_per_gpu_bytes == pytest.approx(mem[i], rel=1e-12)
