"""A recipe's quantization file in the step time (issue 32): the modules Nemotron 3 Super's
NVFP4 te_quant.cfg sets apart (Megatron-Bridge scripts/performance/configs/nemotronh/
te_quant.cfg @ v0.4.0: linear_qkv, linear_proj and the latent projections BF16, the Mamba
out_proj MXFP8) run their GEMMs at their own format's peak, not NVFP4's, and take no
Hadamard transform (TE applies it to the NVFP4 GEMMs' weight-gradient operands only)."""
from dataclasses import replace

import pytest

from ledger.anatomy.mixers import LayerKind
from ledger.parallel import ParallelConfig
from ledger.step.gemm import gemm_s, kind_gemms_s, rht_s
from ledger.step.timing import DEFAULT
from ledger.system import GPUS

ATTN, MAMBA, MOE = (LayerKind("attention", "none", None), LayerKind("mamba", "none", None),
                    LayerKind("none", "moe", None))
TOKENS = 4096


def _nemotron_super():
    from ledger.render.bridge import _config_spec

    return _config_spec("nemotron-3-super").with_seq(TOKENS)


def _configs():
    plain = ParallelConfig(dp=8, zero_stage=1, framework="megatron", precision="fp4-nvfp4")
    return plain, replace(plain, precision="fp4-nvfp4+quant-nemotronh")


@pytest.mark.parametrize("gpu", ["b200", "gb300"])
def test_quantization_files_modules_run_at_their_own_peak(gpu):
    """By hand, tp 1, 4096 tokens: linear_qkv (h -> q + k + v = 4096 + 2 x 2 x 128) and
    linear_proj (32 x 128 -> h) at the BF16 peak; the Mamba in_proj (h -> 18,560) at NVFP4's,
    its out_proj (8192 -> h) at FP8's (MXFP8); fc1 / fc2_latent_proj (h <-> 1024) at BF16's.
    Without the file every one of them runs at the FP4 peak. On GB300 (sm_103) each
    low-precision peak is taken times its kernel's measured share (system.gemm_rates: NVFP4's,
    MXFP8's for the file's MXFP8 module); B200 (sm_100), unmeasured, runs B300's rate over
    BF16 at its own peak plus B300's remainder: MXFP8's share, NVFP4 2.73x BF16's rate."""
    from ledger.system.gemm_rates import kernel_share

    model, g = _nemotron_super(), GPUS[gpu]
    plain, quant = _configs()
    h, bf16 = model.hidden, g.bf16_flops
    fp8, fp4 = g.fp8_flops * kernel_share(gpu, "mxfp8"), g.fp4_flops * kernel_share(gpu, "nvfp4")
    assert kernel_share(gpu, "nvfp4") == pytest.approx(
        13.102 / 3.764 / (13125 / 2250) if gpu == "gb300"
        else 1 / (4 * (1 / 4 + 3.764 / 13.102 - 2250 / 13125)), 1e-4)

    def gs(m, n, k, peak):
        return gemm_s(m, n, k, g, DEFAULT, peak=peak)

    qkv, o = 4096 + 2 * 2 * 128, 32 * 128
    for cfg, attn_peak, out_peak, lat_peak in ((plain, fp4, fp4, fp4), (quant, bf16, fp8, bf16)):
        got_attn = kind_gemms_s(model, ATTN, cfg, TOKENS, g, DEFAULT)["attention"]
        assert got_attn == pytest.approx(gs(TOKENS, qkv, h, attn_peak) + gs(TOKENS, h, o, attn_peak))
        got_ssm = kind_gemms_s(model, MAMBA, cfg, TOKENS, g, DEFAULT)["ssm"]
        assert got_ssm == pytest.approx(gs(TOKENS, 18560, h, fp4) + gs(TOKENS, h, 8192, out_peak))
        got_lat = kind_gemms_s(model, MOE, cfg, TOKENS, g, DEFAULT)["latent_proj"]
        assert got_lat == pytest.approx(gs(TOKENS, 1024, h, lat_peak) + gs(TOKENS, h, 1024, lat_peak))
        # the routed and shared experts stay NVFP4 under the file
        assert kind_gemms_s(model, MOE, cfg, TOKENS, g, DEFAULT)["shared_experts"] == \
            pytest.approx(kind_gemms_s(model, MOE, plain, TOKENS, g, DEFAULT)["shared_experts"])


def test_quantization_files_modules_take_no_hadamard():
    """The file's BF16 / MXFP8 modules drop out of NVFP4's wgrad Hadamard: per layer, 32
    FLOPs an element of both operands (rows x in, rows x out), over the stack's 88 layers
    (the last 14 BF16 ones not in this config): 8 attention layers' linear_qkv (h in, q 4096 +
    k 256 + v 256 out) and linear_proj (4096 in, h out), 40 Mamba out_projs (8192 in, h out), 40 MoE
    blocks' fc1 (h in, 1024 out) and fc2 (1024 in, h out) latent projections. (rht_s
    counts linear_qkv as transformers' q, k and v linears, each with its own input.)"""
    model, g = _nemotron_super(), GPUS["b200"]
    plain, quant = _configs()
    h = model.hidden
    qkv = (h + 4096) + (h + 256) + (h + 256)
    dropped = 8 * (qkv + 4096 + h) + 40 * (8192 + h) + 40 * 2 * (h + 1024)
    want = 32 * TOKENS * dropped / 88 / (g.bf16_flops * g.gemm_efficiency)
    got = rht_s(model, plain, TOKENS, g, DEFAULT) - rht_s(model, quant, TOKENS, g, DEFAULT)
    assert got == pytest.approx(want)


def test_the_bf16_mtp_block_runs_at_the_bf16_peak():
    """keep_mtp_spec_in_bf16 (Megatron-Bridge recipes/nemotronh/nemotron_3_super.py @
    v0.4.0): Nemotron 3 Super's one "*E" MTP block run 2 deep - 4 layers beside the 88 -
    in BF16 with the last 14 of the stack: 18 of the 92 layers the step times at the BF16
    peak; without it the MTP layers run at the recipe's, 14 of 88."""
    from ledger.frameworks.fp8 import recipe
    from ledger.render.bridge import _config_spec
    from ledger.step.gemm import bf16_share

    # the recipe's mtp_num_layers 2, mtp_use_repeated_layer (ledger.validation.bridge RECIPE_MTP)
    model = replace(_config_spec("nemotron-3-super"), mtp_layers=2, mtp_shared=True)
    assert (model.layers, model.mtp_layers, len(model.mtp_kinds)) == (88, 2, 2)
    both = recipe("megatron", "fp4-nvfp4+bf16-mtp+bf16-ends-0-14")
    ends = recipe("megatron", "fp4-nvfp4+bf16-ends-0-14")
    assert bf16_share(model, both) == pytest.approx(18 / 92)
    assert bf16_share(model, ends) == pytest.approx(14 / 88)


def test_estimate_names_the_modules_its_recipe_sets_apart():
    """The text output says which modules run outside the recipe's format."""
    from ledger.render.text import fp8_lines

    cfg = replace(_configs()[1], precision="fp4-nvfp4+quant-nemotronh+bf16-mtp")
    text = "\\n".join(fp8_lines(cfg))
    assert "the MTP block in BF16" in text
    assert "qkv in BF16, attn_out in BF16, latent in BF16, mamba_out in MXFP8" in text
