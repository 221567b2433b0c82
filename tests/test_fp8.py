"""FP8 training (issue 11): each recipe's bytes of state, saved activations and wire, with
expected values from hand arithmetic (the shapes are Llama 3's and DeepSeek-V3's published
configs; the per-recipe facts are cited in ledger.frameworks.fp8.SOURCES)."""
import json

import pytest

from ledger.cli import main
from ledger.errors import LedgerError
from ledger.frameworks import gemm_precision, get, peak_flops
from ledger.model import deepseek_v3, llama3_8b, llama3_70b
from ledger.parallel import ParallelConfig, place
from ledger.placement import layer_activation_bytes
from ledger.system import GPUS, system

N8B = 8_030_261_248  # llama3-8b's parameters (test_model.py)
# llama3-8b's GEMM weights: 32 layers x (q 4096^2 + k, v 2 x 4096 x 1024 + o 4096^2
# + gate, up, down 3 x 4096 x 14336); embedding, output and norms stay BF16
G8B = 32 * (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 3 * 4096 * 14336)
TILE = 4 / 128  # fp32 scale per 1x128 tile


def test_gemm_weight_count_by_hand():
    assert G8B == 6_979_321_856


@pytest.mark.parametrize("precision,params", [
    # bf16 params 2N + TE's FP8 weight and its transpose 2G + per GEMM module (4 a layer:
    # qkv, proj, fc1, fc2) 5 operands x (fp32 scale + amax history of length 1) = 40 B
    ("fp8-delayed", 2 * N8B + 2 * G8B + 32 * 4 * 40),
    ("fp8-tensorwise", 2 * N8B + 2 * G8B + 32 * 4 * 80),  # scale + amax per operand
    # each FP8 copy adds an fp32 scale per 128 x 128 block: 2 G x 4 / 16384 = G / 2048
    ("fp8-blockwise", 2 * N8B + 2 * G8B + G8B // 2048),
    # --fp8-param-gather: the FP8 param and its transpose replace the BF16 param (2 B)
    ("fp8-delayed+param-gather", 2 * N8B + 32 * 4 * 40),
])
def test_llama3_8b_megatron_state_per_gpu(precision, params):
    """dp 8, ZeRO-1 (distributed optimizer): fp32 main grads 4N whole, 12N/8 optimizer."""
    pl = place(llama3_8b(), ParallelConfig(dp=8, zero_stage=1, precision=precision))
    assert pl.per_gpu.params_bytes == pytest.approx(params)
    assert pl.per_gpu.grads_bytes == 4 * N8B
    assert pl.per_gpu.optim_bytes == 12 * N8B // 8
    assert pl.memory.state_bytes == pytest.approx(params + 4 * N8B + 12 * N8B // 8)


def test_deepseek_recipe_keeps_bf16_moments():
    """DeepSeek-V3 sec. 3.3.3: fp32 master (4) + BF16 exp_avg, exp_avg_sq (2 + 2) = 8 B."""
    pl = place(llama3_8b(), ParallelConfig(dp=8, zero_stage=1, precision="fp8-deepseek-v3"))
    assert pl.per_gpu.optim_bytes == 8 * N8B // 8


def test_torchao_keeps_the_fsdp2_state():
    """torchao casts per forward and caches nothing: fp32 params, grads, moments / 8."""
    for p in ("fp8", "fp8-rowwise", "fp8-tensorwise+param-gather"):
        pl = place(llama3_8b(), ParallelConfig(dp=8, zero_stage=3, framework="torchtitan",
                                               precision=p))
        assert pl.per_gpu.total_bytes == pytest.approx(16 * N8B / 8, abs=4)


def test_llama3_70b_tp8_activations_per_layer_by_recipe():
    """Per token (T = 8192, tp = 8, SP): two norms keep their bf16 input 2h, fp32 rstd 4
    and the GEMM input h x g; attention keeps q 2ad, k and v 2 x 2 kv d, flash's output
    2 a d (+ the projection's FP8 copy a d x g under FP8) and fp32 lse 4a; SwiGLU keeps
    fc1's 2f in bf16 and fc2's input f x g. h 8192, a 64, kv 8, d 128, f 28672."""
    h, a, kv, d, f, T = 8192, 64, 8, 128, 28672, 8192

    def per_layer(g, proj_copy):
        norms = 2 * (2 * h + 4 + h * g)
        attn = 2 * a * d + 2 * 2 * kv * d + 2 * a * d + proj_copy * a * d * g + 4 * a
        return T * (norms + attn + (4 + g) * f) / 8

    m = llama3_70b()
    expect = {None: per_layer(2, 0), "fp8-delayed": per_layer(1, 1),
              "fp8-tensorwise": per_layer(1, 1), "fp8-blockwise": per_layer(1 + TILE, 1)}
    assert expect[None] / 2**20 == pytest.approx(268.26, abs=0.01)
    assert expect["fp8-delayed"] / 2**20 == pytest.approx(232.26, abs=0.01)
    for precision, want in expect.items():
        cfg = ParallelConfig(tp=8, precision=precision, dropout=0.0)  # Llama: no dropout
        assert layer_activation_bytes(m, cfg) == pytest.approx(want)
    # torchao saves the BF16 input (float8_linear.py L45): as the BF16 run of torchtitan
    bf16 = layer_activation_bytes(m, ParallelConfig(tp=8, framework="torchtitan"))
    for p in ("fp8-tensorwise", "fp8-rowwise"):
        assert layer_activation_bytes(m, ParallelConfig(tp=8, framework="torchtitan",
                                                        precision=p)) == bf16


@pytest.mark.parametrize("precision,g,out_b,swiglu_recompute", [
    (None, 2, 2, False), ("fp8-delayed", 1, 2 + 1, False),
    ("fp8-blockwise", 1 + TILE, 2 + 1 + TILE, False),
    # E5M6 output (1.5 B + its 1x128 scale) kept once; expert SwiGLU input only, in FP8
    ("fp8-deepseek-v3", 1 + TILE, 1.5 + TILE, True),
])
def test_deepseek_v3_moe_layer_activations(precision, g, out_b, swiglu_recompute):
    """One MoE layer of DeepSeek-V3 at tp 1 (PP 16, EP 64), T = 4096 tokens, Megatron's
    table: norms (2h + 4 + h g each; under an FP8 recipe the input norm's output twice, h g
    more: MLA's q and kv down-projections each keep their own copy, TE linear.py L425-436
    @d0067d0d), MLA latents (kv 512, q 1536: r x 2 + 4 + r x g),
    flash q (a x 192) and k, v (a x 320) in bf16, the output a x 128 x out_b, lse 4a;
    router: fp32 probs 4E, int64 top-k 8k, TE row_id_map 8E; per routed token the
    permuted input h g, its fp32 prob, fc1's 2f (bf16, or FP8 when SwiGLU is recomputed)
    and fc2's input f g (none when recomputed); the shared expert 4f + f g."""
    h, a, E, k, f, T = 7168, 128, 256, 8, 2048, 4096
    norms = 2 * (2 * h + 4 + h * g) + (h * g if precision else 0)
    latents = (512 * 2 + 4 + 512 * g) + (1536 * 2 + 4 + 1536 * g)
    attn = 2 * (a * 192 + a * 320) + a * 128 * out_b + 4 * a
    router = 4 * E + 8 * k + 8 * E
    expert_f = 2 * g if swiglu_recompute else 4 + g
    experts = k * (h * g + 4 + expert_f * f)
    shared = (4 + g) * f
    want = T * (norms + latents + attn + router + experts + shared)
    cfg = ParallelConfig(pp=16, dp=128, ep=64, zero_stage=1, precision=precision,
                         dropout=0.0)  # DeepSeek-V3 has no dropout
    assert layer_activation_bytes(deepseek_v3(), cfg, kind=(True, None)) == pytest.approx(want)


def _rows(pl, axis):
    return {(c.kind, c.what): c.bytes for c in pl.comms if c.axis == axis}


def test_tp_all_gathers_move_fp8_under_te():
    """llama3-8b tp 8 + SP: 6 all-gathers a layer (2 forward, 2 input re-gathers, 2 grad
    outputs) of s h x 2 B x 7/8, x 32 layers; TE sends 1 B (blockwise 1 + 4/128), the 4
    reduce-scatters stay BF16."""
    one = 8192 * 4096 * 2 * 7 / 8
    m = llama3_8b()
    bf16 = _rows(place(m, ParallelConfig(tp=8)), "tp")
    assert bf16[("all_gather", "activations")] == pytest.approx(6 * 32 * one)
    for p, ratio in (("fp8-delayed", 0.5), ("fp8-blockwise", (1 + TILE) / 2)):
        rows = _rows(place(m, ParallelConfig(tp=8, precision=p)), "tp")
        assert rows[("all_gather", "activations, fp8")] == pytest.approx(6 * 32 * one * ratio)
        assert rows[("reduce_scatter", "activations")] == pytest.approx(4 * 32 * one)


def test_fp8_param_gather_moves_fp8_gemm_weights():
    """Megatron ZeRO-1, dp 8: the param all-gather moves 2 B x N x 7/8 in BF16; with
    --fp8-param-gather the GEMM weights move 1 B: (2 (N - G) + G) x 7/8. Grads unchanged."""
    m = llama3_8b()
    base = _rows(place(m, ParallelConfig(dp=8, zero_stage=1)), "dp")
    pg = _rows(place(m, ParallelConfig(dp=8, zero_stage=1,
                                       precision="fp8-delayed+param-gather")), "dp")
    assert base[("all_gather", "params")] == pytest.approx(2 * N8B * 7 / 8)
    assert pg[("all_gather", "params")] == pytest.approx((2 * N8B - G8B) * 7 / 8)
    assert pg[("reduce_scatter", "grads")] == base[("reduce_scatter", "grads")]


def test_which_gemms_run_in_fp8():
    fw = get("megatron", "fp8")
    assert gemm_precision(fw, "qkv", "wgrad") == "fp8"
    assert gemm_precision(fw, "experts_down", "dgrad") == "fp8"
    for g in ("attention_core", "router", "output_head"):
        assert gemm_precision(fw, g) == "bf16"
    assert gemm_precision(get("megatron"), "qkv") == "bf16"
    assert peak_flops(GPUS["h800"], fw, "qkv") == 1979e12
    assert peak_flops(GPUS["h800"], fw, "attention_core") == 989e12
    with pytest.raises(LedgerError, match="no FP8 tensor cores"):
        peak_flops(GPUS["a100-80gb"], fw, "qkv")


def test_gpu_presets_fp8_peaks_and_h800():
    """Dense FP8 peaks (datasheets, half the sparse figures); H800: H100 SXM compute and
    HBM, NVLink 400 GB/s both directions = 200 per direction (DeepSeek-V3 sec. 3.2.2
    measures 160 = 0.8 x 200), 400 Gb/s IB = 50 GB/s."""
    want = {"a100-40gb": 0, "a100-80gb": 0, "h100-sxm": 1979e12, "h200": 1979e12,
            "h100-96gb": 1979e12, "h100-nvl": 1671e12, "h800": 1979e12, "gh200": 1979e12,
            "b200": 4500e12, "mi300x": 2615e12,
            # issue 30's presets, their datasheets' dense FP8 (ledger.system.sources)
            "h20": 296e12, "b300": 4500e12, "gb200": 5000e12, "gb300": 5000e12,
            "mi325x": 2614.9e12, "mi355x": 5033.2e12, "l40s": 733e12, "l4": 242.5e12,
            "rtx-pro-6000": 1000e12}
    assert {n: g.fp8_flops for n, g in GPUS.items()} == want
    h800 = system("h800")
    assert (h800.intra_bytes_per_s, h800.inter_bytes_per_s) == (200e9, 50e9)
    assert h800.bandwidth("nvlink") == pytest.approx(160e9)
    assert h800.gpu.hbm_bytes == GPUS["h100-sxm"].hbm_bytes


@pytest.mark.parametrize("argv,field", [
    (["--fp8-recipe", "blockwise"], "fp8_recipe"),
    (["--framework", "deepspeed", "--precision", "fp8"], "precision"),
    (["--precision", "fp8", "--fp8-recipe", "rowwise"], "fp8_recipe"),
    (["--framework", "torchtitan", "--zero", "3", "--precision", "fp8", "--fp8-recipe",
      "rowwise", "--fp8-param-gather"], "fp8_param_gather"),
])
def test_cli_refuses_what_no_framework_offers(capsys, argv, field):
    assert main(["report", "llama3-8b", "--gpus", "8", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}")


def test_cli_report_names_the_recipe(capsys):
    assert main(["report", "llama3-8b", "--gpus", "8", "--precision", "fp8", "--fp8-recipe",
                 "blockwise", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp8_recipe"] == "blockwise"
    assert main(["report", "llama3-8b", "--gpus", "8", "--precision", "fp8"]) == 0
    assert "fp8 recipe          delayed: TE DelayedScaling" in capsys.readouterr().out


def test_every_gpu_preset_names_its_source(capsys):
    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == set(GPUS)
    assert all("datasheet" in r["source"] for r in rows)


def test_deepseek_dispatches_fp8_and_combines_bf16():
    """DeepSeek-V3 sec. 3.3.3: FP8 with a 4 B scale per 128 elements one way, BF16 back:
    the four all-to-alls of a layer average (1 + 4/128 + 2) / 2 / 2 of their BF16 bytes."""
    from ledger.frameworks import ep_element_bytes, ep_wire_ratio

    fw = get("megatron", "fp8-deepseek-v3")
    assert ep_element_bytes(fw) == {"dispatch": 1 + TILE, "combine": 2}
    assert ep_wire_ratio(fw) == pytest.approx((1 + TILE + 2) / 4)
    assert ep_element_bytes(get("megatron", "fp8-blockwise")) == {"dispatch": 2, "combine": 2}


@pytest.mark.parametrize("precision,per_layer", [
    # 2 B of FP8 copies per GEMM weight + 40 B of delayed-scaling meta per GEMM module
    ("fp8-delayed", 2 * 407_306_240 + 15 * 40),
    ("fp8-blockwise", 2 * 407_306_240 * (1 + 1 / 4096)),
])
def test_deepseek_v3_placement_fp8_weight_copies(precision, per_layer):
    """DeepSeek-V3 PP 16, EP 64, dp 128, ZeRO-1: PP rank 5 holds 4 MoE layers (61 layers
    over 16 stages: 3, 3, then 4s). Per MoE layer one GPU quantizes MLA's q_a 7168 x 1536,
    q_b 1536 x 128 x 192, kv_a 7168 x 576, kv_b 512 x 128 x 256, o 128 x 128 x 7168
    (187,105,280), the shared expert 3 x 7168 x 2048 (44,040,192) and its 256 / 64 = 4
    routed experts (176,160,768): 407,306,240 weights in 5 + 2 + 4 x 2 = 15 modules."""
    assert 11_010_048 + 37_748_736 + 4_128_768 + 16_777_216 + 117_440_512 == 187_105_280
    assert 187_105_280 + 44_040_192 + 4 * 44_040_192 == 407_306_240
    kw = dict(pp=16, dp=128, ep=64, zero_stage=1, num_microbatches=16)
    base = place(deepseek_v3(), ParallelConfig(**kw)).memory_by_rank[5].state_bytes
    fp8 = place(deepseek_v3(), ParallelConfig(**kw, precision=precision)).memory_by_rank[5]
    assert fp8.state_bytes - base == pytest.approx(4 * per_layer)


def test_deepseek_v3_dispatches_in_fp8_and_combines_in_bf16():
    """DeepSeek-V3 sec. 3.3.3 / DeepEP: the dispatch all-to-all (and its backward twin)
    carries FP8 with one fp32 scale per 128 values, the combine BF16: the four passes
    average (1 + 4/128 + 2) / (2 x 2) of the BF16 bytes."""
    from ledger.model import preset
    from ledger.parallel import ParallelConfig, place

    m = preset("deepseek-v3").with_seq(4096)
    kw = dict(pp=16, dp=128, ep=64, zero_stage=1, num_microbatches=120)
    bf16 = place(m, ParallelConfig(**kw)).total_bytes("ep")
    fp8 = place(m, ParallelConfig(**kw, precision="fp8-deepseek-v3")).total_bytes("ep")
    assert fp8 == pytest.approx(bf16 * (1 + 4 / 128 + 2) / 4)
