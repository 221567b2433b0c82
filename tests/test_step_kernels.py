"""Kernels the step prices apart from its GEMMs and fitted elementwise term (ledger.step.eager,
ledger.step.gemm._ssd_s): gpt-oss's clamped GLU and fc2 bias, counted by hand from Megatron-Core's TEGroupedMLP (NVIDIA/Megatron-LM@55ac7082,
fusions/fused_bias_geglu.py L424-431, moe/experts.py L609-625)."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.io.hf.reader import read_hf_config
from ledger.parallel import ParallelConfig
from ledger.step import DEFAULT, estimate
from ledger.step.eager import expert_pass_bytes, rope_pass_bytes
from ledger.system import system

ROOT = Path(__file__).parents[1]


def _gpt_oss():
    model, _ = read_hf_config(ROOT / "examples" / "gpt-oss-120b.json")
    return replace(model, seq_len=4096)


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 64, "ep": 64, "micro_batch": 4,
                             "num_microbatches": 5, "zero_stage": 1, **kw})


def test_gpt_oss_reads_its_clamp_and_biases():
    m = _gpt_oss()
    assert m.glu_clamp == 7.0 and m.mlp_bias and m.gated_mlp  # swiglu_limit 7.0
    assert (m.hidden, m.moe_ffn_hidden, m.top_k) == (2880, 2880, 4)


def test_passes_counted_by_hand():
    # 4 x 4096 tokens, top-4: 65,536 routed rows on each GPU whatever the EP size (every
    # layer is MoE). Forward: 4 passes over the 2 x 2880 fc1 output (two clamps, the cat),
    # 6 over the 2880-wide fc2 output (b*p, the add, the cat); backward 5 and 6; BF16.
    fwd, bwd = expert_pass_bytes(_gpt_oss(), _cfg(), 16384)
    assert fwd == 65536 * (4 * 5760 + 6 * 2880) * 2 == 5_284_823_040
    assert bwd == 65536 * (5 * 5760 + 6 * 2880) * 2 == 6_039_797_760
    # without the clamp only the bias passes stay; without either, nothing
    fwd0, _ = expert_pass_bytes(replace(_gpt_oss(), glu_clamp=0.0), _cfg(), 16384)
    assert fwd0 == 65536 * 6 * 2880 * 2
    assert expert_pass_bytes(replace(_gpt_oss(), glu_clamp=0.0, mlp_bias=False), _cfg(),
                             16384) == (0.0, 0.0)
    # the counts are Megatron-Core's TEGroupedMLP: another framework's MoE code is not read
    assert expert_pass_bytes(_gpt_oss(), _cfg(framework="torchtitan", zero_stage=3), 16384) == (0.0, 0.0)


def test_flex_dispatcher_s_fp32_probabilities_widen_the_bias_chain():
    """DeepEP and HybridEP hand the experts fp32 probabilities (token_dispatcher.py
    L1033-1039, L1178-1184 @d7288711): ``b * p`` promotes _apply_bias to fp32. Forward: the
    product, the add and the cat at 4 bytes (6 x 4) and the cast back (read 4, write 2);
    backward the cast's and the add's gradients (2 + 4 each) and the 6 fp32 passes: 28 and
    36 bytes an element of the 2880-wide fc2 output, against 12 and 12 in bf16."""
    clamp_f, clamp_b = 65536 * 4 * 5760 * 2, 65536 * 5 * 5760 * 2
    for backend in ("deepep", "hybridep"):
        fwd, bwd = expert_pass_bytes(_gpt_oss(), _cfg(moe_dispatcher="flex", ep_backend=backend),
                                     16384)
        assert fwd == clamp_f + 65536 * 2880 * 28
        assert bwd == clamp_b + 65536 * 2880 * 36
    # the alltoall dispatcher keeps the router's bf16 probabilities
    assert expert_pass_bytes(_gpt_oss(), _cfg(moe_dispatcher="alltoall"), 16384) \
        == expert_pass_bytes(_gpt_oss(), _cfg(), 16384)


def test_the_passes_are_the_step_s_elementwise_time_at_hbm_bandwidth():
    gb200 = system("gb200")
    m, cfg = _gpt_oss(), _cfg()
    plain = replace(m, glu_clamp=0.0, mlp_bias=False)
    a = estimate(m, cfg, gb200, precision="bf16", optimizer="adam").breakdown["elementwise"]
    b = estimate(plain, cfg, gb200, precision="bf16", optimizer="adam").breakdown["elementwise"]
    # the biases also add saved bytes of their own to the fitted term: the passes are the
    # bulk of the difference, 36 layers x 5 micro-batches x (fwd + bwd) / HBM
    passes = 36 * 5 * (5_284_823_040 + 6_039_797_760) / gb200.gpu.hbm_bytes_per_s
    assert a - b == pytest.approx(passes, rel=0.05)


def test_gpt_oss_reads_yarn_s_attention_factor():
    # rope_scaling: yarn, factor 32, no mscale / mscale_all_dim -> 0.1 ln 32 + 1
    import math

    assert _gpt_oss().rope_mscale == pytest.approx(0.1 * math.log(32) + 1) == 1.3465735902799727
    cfg = json.loads((ROOT / "examples" / "gpt-oss-120b.json").read_text())
    cfg["rope_scaling"] |= {"mscale": 1.0, "mscale_all_dim": 1.0}  # DeepSeek-V3's pair
    from ledger.io.hf import spec_from_dict
    assert spec_from_dict(cfg, "x").rope_mscale == 1.0


@pytest.mark.parametrize("changes,expected", [
    ({"attention_factor": 1.2}, 1.2),  # transformers takes the config's own first
    ({"mscale": 0, "mscale_all_dim": 1.0}, 1.3465735902799727),  # a zero mscale: 'and' fails
    ({"factor": None}, 1.3465735902799727)])  # 131,072 / 4,096 = 32, as transformers derives
def test_yarn_attention_factor_as_transformers_takes_it(changes, expected):
    """transformers 5.23.0 _compute_yarn_parameters: attention_factor when given; mscale
    and mscale_all_dim only when both are truthy; a missing factor from
    max_position_embeddings over original_max_position_embeddings."""
    cfg = json.loads((ROOT / "examples" / "gpt-oss-120b.json").read_text())
    cfg["rope_scaling"] |= changes
    from ledger.io.hf import spec_from_dict
    assert spec_from_dict(cfg, "x").rope_mscale == pytest.approx(expected)


@pytest.mark.parametrize("changes,words", [
    ({"factor": "x"}, "'factor' = 'x' is not a finite number"),
    ({"factor": [32]}, "'factor' = [32] is not a finite number"),
    ({"factor": -2}, "'factor' = -2 must be positive"),
    ({"mscale": "a", "mscale_all_dim": 1}, "'mscale' = 'a' is not a finite number"),
    ({"mscale": 1, "mscale_all_dim": -2.885390081777927}, "not a positive number")])
def test_a_yarn_factor_that_means_nothing_is_refused_by_name(changes, words):
    """Each of these crashed the reader with a TypeError, ValueError or ZeroDivisionError."""
    from ledger.errors import LedgerError
    from ledger.io.hf import spec_from_dict
    cfg = json.loads((ROOT / "examples" / "gpt-oss-120b.json").read_text())
    cfg["rope_scaling"] |= changes
    with pytest.raises(LedgerError, match=words.replace("[", r"\[").replace("]", r"\]")):
        spec_from_dict(cfg, "x")


def test_rope_passes_counted_by_hand():
    # q and k of 64 + 8 heads x 64 on one GPU, 4 x 4096 tokens, BF16: 12 passes forward (t *
    # cos, the negated half, the cat, * sin, the add, the final cat), 13 backward, every layer
    fwd, bwd = rope_pass_bytes(_gpt_oss(), _cfg(), 16384)
    assert (fwd, bwd) == (16384 * 72 * 64 * 2 * 12, 16384 * 72 * 64 * 2 * 13)
    assert rope_pass_bytes(_gpt_oss(), _cfg(tp=2, dp=32, ep=32, sequence_parallel=True),
                           16384)[0] == fwd / 2  # TP splits the heads
    # an mscale of 1 runs TE's fused RoPE; another framework's RoPE is not read
    assert rope_pass_bytes(replace(_gpt_oss(), rope_mscale=1.0), _cfg(), 16384) == (0.0, 0.0)
    assert rope_pass_bytes(_gpt_oss(), _cfg(framework="torchtitan", zero_stage=3),
                           16384) == (0.0, 0.0)
    gb200 = system("gb200")
    a, b = (estimate(m, _cfg(), gb200, precision="bf16", optimizer="adam").breakdown[
        "elementwise"] for m in (_gpt_oss(), replace(_gpt_oss(), rope_mscale=1.0)))
    assert a - b == pytest.approx(36 * 5 * (fwd + bwd) / gb200.gpu.hbm_bytes_per_s)


def test_mamba2_ssd_backward_as_mamba_ssm_runs_it():
    """Nemotron-3-Nano's 23 Mamba-2 layers (64 heads of 64, d_state 128, 8 groups, chunks of
    128) on 8,192 tokens at TP 1: the backward (ssd_combined.py L441-509 @e9594ce1) runs 3
    C B^T-shaped products per group and 8 per head against the forward's 1 and 3 (chunk
    state, read-out, intra-chunk); the step already prices twice the forward, so the extra
    is one group product and two head products (one Q x P x Q, one Q x P x N) a chunk."""
    from ledger.step.gemm import gemm_s, recurrent_core_bwd_s, recurrent_core_s

    model, _ = read_hf_config(ROOT / "src/ledger/validation/data/hf/nemotron-3-nano.json")
    gpu, cal, cfg, tokens = system("b200").gpu, DEFAULT, _cfg(ep=8, dp=8), 8192
    chunks, mamba = tokens / 128, 23 / 52
    cb, xq, ro = gemm_s(128, 128, 128, gpu, cal), gemm_s(128, 64, 128, gpu, cal), \
        gemm_s(128, 64, 128, gpu, cal)
    fwd = mamba * chunks * (8 * cb + 64 * (xq + 2 * ro))
    assert recurrent_core_s(model, cfg, tokens, gpu, cal) == pytest.approx(fwd)
    extra = mamba * chunks * (8 * cb + 64 * (xq + ro))
    assert recurrent_core_bwd_s(model, cfg, tokens, gpu, cal) == pytest.approx(extra)
    # in FLOPs a chunk: forward 8 x 2 x 128^3 + 64 x 3 x 2 x 128^2 x 64 = 436.2 M, the extra
    # 8 x 2 x 128^3 + 64 x 2 x 2 x 128^2 x 64 = 301.99 M: the backward is 2.69x the forward
    ratio = 2 + extra / fwd
    assert 2.6 < ratio < 2.75, ratio


def test_fp8_attention_runs_the_attention_core_at_the_fp8_peak():
    """fp8_dot_product_attention (TE fp8_dpa under Megatron's delayed / tensorwise / mxfp8
    recipes, fp8_utils.py L777-788 @d98e8a64): on a GPU with a measured fused kernel
    (ledger.system.attention) the core runs at cuDNN's FP8 kernel's measured rate - GB200
    at 8K keys 1,987 TFLOP/s forward against BF16's 1,598, 1,478 backward against 1,311;
    on one without, QK^T and PV at the FP8 peak - the forward exactly halves where the FP8
    peak is twice the BF16 one. The GEMMs around it do not move; under BF16 or the
    blockwise recipe (no fp8_dpa) nothing moves."""
    from ledger.model import llama3_8b
    from ledger.step.layer_time import layer_times
    from ledger.step.timing import structure
    from ledger.placement import place

    model = replace(llama3_8b(), seq_len=8192)

    def lt(gpu=system("gb200"), **kw):
        cfg = ParallelConfig(tp=1, pp=1, dp=8, micro_batch=1, num_microbatches=4, **kw)
        pl = place(model, cfg, precision=cfg.precision, gpus_per_node=gpu.gpus_per_node,
                   gpus_per_domain=gpu.gpus_per_domain, gpu=gpu.gpu)
        return layer_times(model, cfg, gpu, structure(model, cfg, gpu, pl).links, DEFAULT)

    base, fast = lt(precision="fp8-mxfp8"), lt(precision="fp8-mxfp8", fp8_attention=True)
    assert fast.attention == pytest.approx(base.attention * 1598 / 1987)
    assert fast.attention_bwd == pytest.approx(base.attention_bwd * 1311 / 1478)
    assert fast.gemm == base.gemm and fast.elementwise == base.elementwise
    rtx = system("rtx-pro-6000")  # no measurement: the GEMM pricing at the FP8 peak
    assert rtx.gpu.fp8_flops == 2 * rtx.gpu.bf16_flops
    assert lt(rtx, precision="fp8-mxfp8", fp8_attention=True).attention == pytest.approx(
        lt(rtx, precision="fp8-mxfp8").attention / 2)
    gpu = system("gb200")
    for prec in (None, "fp8-blockwise"):
        assert lt(precision=prec, fp8_attention=True).attention == lt(precision=prec).attention
    cfg = dict(tp=1, pp=1, dp=8, micro_batch=1, num_microbatches=4, precision="fp8-mxfp8")
    slow = estimate(model, ParallelConfig(**cfg), gpu).step_time_s
    assert estimate(model, ParallelConfig(**cfg, fp8_attention=True), gpu).step_time_s < slow


@pytest.mark.parametrize("flags,refused", [
    ([], True),  # BF16
    (["--precision", "fp8", "--fp8-recipe", "blockwise"], True),  # TE takes no fp8_dpa
    (["--precision", "fp8", "--fp8-recipe", "mxfp8", "--framework", "torchtitan"], True),
    (["--precision", "fp8", "--fp8-recipe", "mxfp8"], False),
])
def test_fp8_attention_flag_refused_where_it_changes_nothing(capsys, flags, refused):
    """--fp8-dot-product-attention typed where TE would not run the core in FP8 is refused
    in one line (as --fp8-recipe without --precision fp8), not accepted unpriced."""
    from ledger.cli import main

    argv = ["estimate", "llama3-8b", "--gpus", "8", "--gpu", "b200", *flags]
    code = main([*argv, "--fp8-dot-product-attention"])
    out, err = capsys.readouterr()
    if refused:
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("error: fp8_attention: --fp8-dot-product-attention runs the "
                              "attention core in FP8 under --framework megatron")
    else:
        assert code == 0, err
        assert main(argv) == 0 and capsys.readouterr().out != out  # it moves the step


def test_fp8_attention_flag_prices_its_saved_tensors(capsys):
    """Where it runs, --fp8-dot-product-attention's FP8 saved q, k, v are priced
    (ledger.frameworks.fp8_attention): nothing named on stderr, no approximate mark, less
    memory than without it."""
    import json

    from ledger.cli import main

    argv = ["estimate", "llama3-8b", "--gpus", "8", "--gpu", "b200", "--precision", "fp8",
            "--fp8-recipe", "mxfp8", "--json"]
    assert main([*argv, "--fp8-dot-product-attention"]) == 0
    out, err = capsys.readouterr()
    on = json.loads(out)
    assert err == "" and "approximate" not in on
    assert main(argv) == 0
    out, err = capsys.readouterr()
    off = json.loads(out)
    assert err == "" and "approximate" not in off
    assert on["memory_per_gpu_bytes"] < off["memory_per_gpu_bytes"]


LAUNCH = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --ffn-hidden-size 4096 "
          "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
          "--global-batch-size 64 --vocab-size 32000 --bf16 --tokenizer-type NullTokenizer "
          "--fp8-format e4m3 --fp8-recipe mxfp8")
TYPED = ["--recompute", "selective", "--recompute-modules", "core_attn,gdp_in_proj"]
GDP = ("--recompute-modules gdp_in_proj (GatedDeltaProduct / HyperConnections' recompute, "
       "not modelled: priced as not recomputed)")


def test_unpriced_flag_typed_beside_a_launch_is_named(capsys, tmp_path):
    """Typed beside a launch file that sets nothing unpriced, a flag's unpriced part is
    named on stderr as the mark says ('named on stderr'), not left unnamed; the priced
    --fp8-dot-product-attention beside it adds nothing."""
    from ledger.cli import main

    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH + "\n")
    assert main(["estimate", "--from-megatron", str(path), "--gpus", "8", "--gpu", "b200",
                 "--fp8-dot-product-attention", *TYPED]) == 0
    out, err = capsys.readouterr()
    assert "approximate: the command line sets 1 thing(s)" in out
    assert err == f"warning: not modelled, so the figures are approximate: {GDP}\n"


def test_unpriced_flag_typed_beside_an_approximate_launch_is_named_too(capsys, tmp_path):
    """Beside a launch file that itself sets something unpriced, the typed flag's unpriced
    part is named in the same one stderr line and in the JSON's list, not dropped."""
    from ledger.cli import main

    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH + " --reuse-grad-buf-for-mxfp8-param-ag\n")
    argv = ["estimate", "--from-megatron", str(path), "--gpus", "8", "--gpu", "b200", *TYPED]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("warning: not modelled")]
    assert len(lines) == 1, err
    assert "--reuse-grad-buf-for-mxfp8-param-ag" in lines[0] and lines[0].endswith(GDP)
    assert f"approximate: {path} and the command line set 2 thing(s)" in out
    assert main(argv + ["--json"]) == 0
    listed = json.loads(capsys.readouterr()[0])["approximate"]
    assert listed == ["--reuse-grad-buf-for-mxfp8-param-ag", GDP]


@pytest.mark.parametrize("precision", ["fp8-mxfp8", "fp8-tensorwise", "fp4-nvfp4"])
def test_low_precision_saved_inputs_do_not_shrink_the_elementwise_traffic(precision):
    """A low-precision recipe keeps its linear layers' inputs quantized (the memory model's
    saved-tensor table ``+fp8-<recipe>``), but the kernels that make them - norms, the
    attention core, the activation, a Mamba mixer's gated norm - write the activation
    dtype and TE's quantizer reads that copy (ledger.step.recompute.written_dtype): the
    elementwise term is priced on the BF16 bytes, as the same term already prices FP8
    attention's q, k, v, while the memory held is the recipe's."""
    from ledger.model import llama3_8b
    from ledger.placement import activation_bytes_per_layer
    from ledger.step.layer_time import layer_times

    m, gpu = llama3_8b(), system("b200")
    links = {"tp": "nvlink", "cp": "nvlink", "ep": "nvlink", "pp": "nvlink"}

    def cfg(p):
        return ParallelConfig(tp=1, pp=1, dp=8, micro_batch=1, num_microbatches=4,
                              framework="megatron", precision=p)

    def kept(p):
        return activation_bytes_per_layer(m, cfg(p), flash=True, recompute="none",
                                          dropout=0.0, offload=False)
    assert kept(precision) < 0.9 * kept(None)  # the recipe keeps less ...
    low, bf16 = (layer_times(m, cfg(p), gpu, links, DEFAULT).elementwise
                 for p in (precision, None))
    if precision != "fp8-mxfp8":  # ... and NVFP4 reads its inputs twice more (amax, the
        assert low > bf16  # column-wise Hadamard cast), current scaling once more (the
        # amax): ledger.step.quantize, hand-counted in tests/test_quantize.py
    else:
        assert low == pytest.approx(bf16)  # ... but its kernels write as much
    # the elementwise term is the fitted traffic over the BF16 bytes at HBM bandwidth
    assert bf16 == pytest.approx(DEFAULT.elementwise_traffic * kept(None)
                                 / gpu.gpu.hbm_bytes_per_s)


def test_selective_rerun_bytes_are_the_activation_dtype_s():
    """What a selective recompute writes again (``rerun_bytes``) is counted on the same
    BF16 basis: the same under MXFP8 as under BF16 for Nemotron 3 Nano's moe_act and
    layernorm modules."""
    from ledger.step.recompute import rerun_bytes

    model, _ = read_hf_config(ROOT / "src/ledger/validation/data/hf/nemotron-3-nano.json")
    base = dict(tp=1, pp=1, dp=8, ep=8, micro_batch=1, num_microbatches=4,
                framework="megatron", recompute="selective")
    mods = ("moe_act", "layernorm")
    a = rerun_bytes(model, ParallelConfig(precision="fp8-mxfp8", **base), mods)
    b = rerun_bytes(model, ParallelConfig(precision=None, **base), mods)
    assert a > 0 and a == pytest.approx(b)
