"""Muon (issue 30): optimizer-state bytes, Newton-Schulz FLOPs and distributed Muon's
gathers, by hand on llama3-8b's published shapes; the optimizer as Megatron launches
name it."""
import pytest

from ledger.io.megatron.args import namespace, parse
from ledger.io.megatron.flags import placement_flags
from ledger.model import llama3_8b, llama3_70b
from ledger.optim import gather_bytes, managed_params, managed_share, ns_flops, step_flops
from ledger.parallel import ParallelConfig, place
from ledger.step import estimate
from ledger.system import system

N8B = 8_030_261_248  # llama3-8b's parameters (test_model.py)
# per layer: q, o 4096 x 4096; k, v 1024 x 4096; gate, up, down 14336 x 4096 (32 layers);
# the embedding and the output head (128256 x 4096 each) and the norms are Adam's
LAYER = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096),
         (14336, 4096), (14336, 4096), (4096, 14336)]
G8B = 32 * sum(r * c for r, c in LAYER)


def _ns(m, n):  # 5 quintic iterations on the short side m: X X^T, A A, B X
    m, n = min(m, n), max(m, n)
    return 5 * (2 * m * m * n + 2 * m ** 3 + 2 * m * m * n)


def test_newton_schulz_flops_by_hand():
    assert ns_flops(4096, 4096) == 5 * 6 * 4096 ** 3
    assert ns_flops(1024, 4096) == 5 * (4 * 1024 ** 2 * 4096 + 2 * 1024 ** 3)
    assert ns_flops(14336, 4096) == ns_flops(4096, 14336)  # on the transpose


def test_muon_manages_the_layer_matrices():
    assert G8B == 6_979_321_856 == managed_params(llama3_8b())
    assert managed_share(llama3_8b()) == pytest.approx(G8B / N8B)


def test_llama3_8b_state_under_muon():
    """dp 8, ZeRO-1 (Megatron's layer-wise optimizer): fp32 master 4 B for every
    parameter, one fp32 momentum for the matrices, Adam's two for the rest."""
    for opt in ("muon", "muon-moonlight"):
        pl = place(llama3_8b(), ParallelConfig(dp=8, zero_stage=1), optimizer=opt)
        want = (4 * N8B + 4 * G8B + 8 * (N8B - G8B)) / 8
        assert pl.per_gpu.optim_bytes == pytest.approx(want)
        assert pl.per_gpu.grads_bytes == 4 * N8B  # unchanged: fp32 main grads


def test_newton_schulz_per_gpu():
    """Megatron: one owner per matrix in the DP group under ZeRO (layer-wise), every
    rank without it; Moonlight: every DP rank runs every matrix of its shard."""
    total = 32 * sum(_ns(r, c) for r, c in LAYER)
    m = llama3_8b()
    assert step_flops(m, ParallelConfig(dp=8, zero_stage=1)) == pytest.approx(total / 8)
    assert step_flops(m, ParallelConfig(dp=8)) == pytest.approx(total)
    assert step_flops(m, ParallelConfig(dp=8, zero_stage=1), "muon-moonlight") == \
        pytest.approx(total)
    assert step_flops(m, ParallelConfig(tp=2, pp=4, dp=4, zero_stage=1)) == \
        pytest.approx(total / 16)  # TP duplicated: the whole matrix on both TP ranks


def test_gathers_by_hand():
    """tp 2: every llama matrix is TP-split, its fp32 momentum gathered whole (half of it
    received); Moonlight with ZeRO-1 over dp 4 also gathers the BF16 momentum's DP shards
    (3/4 of the TP shard received)."""
    m = llama3_8b()
    tp, dp = gather_bytes(m, ParallelConfig(tp=2, dp=4))
    assert (tp, dp) == (pytest.approx(4 * G8B / 2), 0.0)
    # the layer-wise optimizer: DDP's all-reduce of the fp32 gradients of the TP shard
    # adds a reduce-scatter's (n - 1) / n over ZeRO-1's
    tp, dp = gather_bytes(m, ParallelConfig(tp=2, dp=4, zero_stage=1))
    assert (tp, dp) == (pytest.approx(4 * G8B / 2), pytest.approx(4 * N8B / 2 * 3 / 4))
    tp, dp = gather_bytes(m, ParallelConfig(tp=2, dp=4, zero_stage=1), "muon-moonlight")
    assert dp == pytest.approx(2 * G8B / 2 * 3 / 4)


def test_muon_in_the_step():
    """The optimizer term grows by Newton-Schulz and its gathers: Megatron's owners split
    the work over dp 8, Moonlight's every rank runs all of it."""
    m, cfg, sysm = llama3_70b(), ParallelConfig(tp=8, pp=4, dp=8, zero_stage=1,
                                                num_microbatches=64), system("h100-sxm")
    opt = {o: estimate(m, cfg, sysm, optimizer=o).breakdown["optimizer"]
           for o in ("adam", "muon", "muon-moonlight")}
    assert opt["adam"] < opt["muon"] < opt["muon-moonlight"]
    # the NS FLOPs at no more than the GPU's sustained BF16 rate
    ns = step_flops(m, cfg) / (989e12 * 0.62)
    assert opt["muon"] - opt["adam"] > ns


def _flags(words):
    ns = namespace(parse(words + ["--num-layers", "12", "--micro-batch-size", "1"],
                         "launch.sh"))
    return placement_flags(ns, "launch.sh")[0]


def test_megatron_names_muon():
    # tests/functional_tests/test_cases/moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_muon/
    # model_config.yaml at Megatron-LM d98e8a64: --optimizer muon --use-distributed-optimizer
    f = _flags(["--optimizer", "muon", "--use-distributed-optimizer"])
    assert (f["optimizer"], f["zero"]) == ("muon", 1)
    # the deprecated dist_muon is muon under the layer-wise distributed optimizer
    f = _flags(["--optimizer", "dist_muon"])
    assert (f["optimizer"], f["zero"]) == ("muon", 1)
    assert _flags(["--optimizer", "muon"])["zero"] == 0
