"""The MoE dispatcher's own permutation kernels (ledger.step.eager.dispatch_pass_bytes),
counted by hand from Megatron-Core's token_dispatcher.py @d98e8a64: the alltoall
dispatcher's permute (L667-680), sort by local expert (L780-788), unsort (L815-822) and
unpermute (L891-899); DeepEP's permute and unpermute around its kernels (L1424-1466);
HybridEP's standalone kernels unless moe_permute_fusion_into_hybridep fuses them into its
dispatch and combine (tests/test_hybridep_permute.py)."""
from dataclasses import replace

import pytest

from ledger.model import preset
from ledger.parallel import ParallelConfig
from ledger.step import estimate
from ledger.step.eager import dispatch_pass_bytes
from ledger.system import system


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 1,
                             "num_microbatches": 4, "zero_stage": 1, **kw})


def test_alltoall_passes_by_hand():
    m = replace(preset("qwen3-30b-a3b"), seq_len=4096)  # 48 MoE layers, top-8, h 2048
    fwd, bwd = dispatch_pass_bytes(m, _cfg(moe_dispatcher="alltoall"), 4096)
    # 4,096 tokens x 8 rows each; 16 local experts: permute 2, sort 2, unsort 2, unpermute
    # 1 + 1/8 passes over rows x 2,048 x 2 B; the backward mirrors each
    assert fwd == bwd == pytest.approx(4096 * 8 * 2048 * 2 * (7 + 1 / 8))
    # one expert a GPU: no sort by local expert and back
    one = replace(m, num_experts=8)
    assert dispatch_pass_bytes(one, _cfg(moe_dispatcher="alltoall"), 4096)[0] == \
        pytest.approx(4096 * 8 * 2048 * 2 * (3 + 1 / 8))


def test_flex_backends_and_the_rest():
    m = replace(preset("qwen3-30b-a3b"), seq_len=4096)
    deepep = dispatch_pass_bytes(m, _cfg(moe_dispatcher="flex", ep_backend="deepep"), 4096)
    assert deepep[0] == pytest.approx(4096 * 8 * 2048 * 2 * 4)
    assert dispatch_pass_bytes(m, _cfg(moe_dispatcher="flex", ep_backend="hybridep",
                                       hybridep_permute_fusion=True), 4096) == (0.0, 0.0)
    assert dispatch_pass_bytes(m, _cfg(moe_dispatcher="allgather"), 4096) == (0.0, 0.0)
    assert dispatch_pass_bytes(preset("llama3-8b"), _cfg(ep=1), 4096) == (0.0, 0.0)


FUSED = dict(moe_dispatcher="flex", ep_backend="hybridep", hybridep_permute_fusion=True)


def _same_map(monkeypatch):
    """Both dispatchers priced with the alltoall's row_id_map (HybridEP builds none:
    placement.ep_buffers.row_id_map_share), so the saved bytes' writes match and the
    elementwise gap is the passes alone."""
    from ledger.placement import layers

    monkeypatch.setattr(layers, "row_id_map_share", lambda model, cfg: 1.0)


def test_the_passes_are_elementwise_time_at_hbm_bandwidth(monkeypatch):
    _same_map(monkeypatch)
    m, b200 = replace(preset("qwen3-30b-a3b"), seq_len=4096), system("b200")
    a = estimate(m, _cfg(moe_dispatcher="alltoall"), b200, precision="bf16",
                 optimizer="adam").breakdown["elementwise"]
    h = estimate(m, _cfg(**FUSED), b200, precision="bf16",
                 optimizer="adam").breakdown["elementwise"]
    passes = 48 * 4 * 2 * 4096 * 8 * 2048 * 2 * (7 + 1 / 8) / b200.gpu.hbm_bytes_per_s
    assert a - h == pytest.approx(passes, rel=1e-9)


def test_the_moe_recompute_runs_the_permutations_again(monkeypatch):
    """--recompute-modules moe checkpoints the whole MoE layer, the dispatcher's permutation
    kernels included (moe/moe_layer.py L655-720 @d98e8a64): its backward re-runs their
    forward passes, 7 + 1/8 over rows x h under alltoall, none under HybridEP fused."""
    _same_map(monkeypatch)
    m, b200 = replace(preset("qwen3-30b-a3b"), seq_len=4096), system("b200")

    def gap(**kw):
        a, h = (estimate(m, _cfg(**d, **kw), b200, precision="bf16", optimizer="adam")
                .breakdown["elementwise"] for d in (dict(moe_dispatcher="alltoall"), FUSED))
        return a - h

    rerun = 48 * 4 * 4096 * 8 * 2048 * 2 * (7 + 1 / 8) / b200.gpu.hbm_bytes_per_s
    moe = gap(recompute="selective", recompute_modules=("moe",))
    assert moe - gap() == pytest.approx(rerun, rel=1e-9)
