"""A recipe's BF16 layers priced as they save (ledger.placement.bf16_layers) and
Transformer Engine's parallel cross-entropy (ledger.frameworks.losses "te-parallel")."""
from dataclasses import replace

import pytest

from ledger.config import ParallelConfig
from ledger.frameworks.fp8 import recipe, spell
from ledger.frameworks.losses import LOSSES
from ledger.model import preset
from ledger.placement import place
from ledger.placement.layers import layer_activation_bytes


def test_te_cross_entropy_keeps_two_bytes_a_bf16_logit():
    # TE 71bbefbf triton/cross_entropy.py L111: the gradient written over the bf16 logits
    te = LOSSES["te-parallel"]
    assert (te.forward_bytes(2), te.saved_bytes(2), te.backward_bytes(2), te.grad_bytes(2),
            te.cached_bytes(2)) == (2.0, 2.0, 2.0, 2.0, 0.0)
    assert LOSSES["vocab-parallel"].backward_bytes(2) == 6.0


def test_bf16_mtp_suffix_round_trips():
    p = spell("nvfp4", prefix="fp4", bf16_layers=(0, 14), bf16_mtp=True)
    assert p == "fp4-nvfp4+bf16-mtp+bf16-ends-0-14"
    r = recipe("megatron", p)
    assert (r.name, r.bf16_layers, r.bf16_mtp) == ("nvfp4", (0, 14), True)
    assert not recipe("megatron", "fp4-nvfp4+bf16-ends-0-14").bf16_mtp


def test_bf16_end_layers_save_bf16_inputs():
    model = preset("llama3-8b").with_seq(4096)
    cfg = ParallelConfig(dp=8, zero_stage=1, framework="megatron", precision="fp8-tensorwise")
    ends = replace(cfg, precision="fp8-tensorwise+bf16-ends-1-2")
    low, bf = (place(model, c).memory_by_rank[0] for c in (cfg, ends))
    per_layer = layer_activation_bytes(model, replace(cfg, precision=None)) \
        - layer_activation_bytes(model, cfg)
    assert per_layer > 0  # FP8 saves its GEMM inputs in 1 B, BF16 in 2
    assert bf.activations_bytes - low.activations_bytes == pytest.approx(
        3 * per_layer, rel=1e-9)


def test_megatron_mamba_under_fp8_keeps_megatron_tensors_its_gemm_inputs_in_fp8():
    """Megatron-Core's Mamba-2 (ledger.arch.recurrent: zxBCdt, out_x, the norm's input,
    out_proj's input) under an FP8 recipe: only the two GEMM inputs - in_proj's (the
    pre-norm's output, h wide) and out_proj's (inner wide) - drop to 1 B (tensorwise);
    before, the recipe's table name hid Megatron's kernels and transformers' were priced."""
    from ledger.anatomy.mixers import LayerKind
    from ledger.render.bridge import _config_spec

    model = _config_spec("nemotron-3-super").with_seq(4096)
    mamba = LayerKind("mamba", "none", None)
    bf16 = ParallelConfig(dp=8, zero_stage=1, framework="megatron")
    fp8 = replace(bf16, precision="fp8-tensorwise")
    gap = layer_activation_bytes(model, bf16, mamba) - layer_activation_bytes(model, fp8, mamba)
    assert gap == pytest.approx(4096 * (model.hidden + model.mamba.inner) * (2 - 1.0))


def test_a_quantization_files_modules_keep_their_own_format():
    """Nemotron 3 Super's NVFP4 te_quant.cfg (Megatron-Bridge v0.4.1): BF16 linear_qkv and
    linear_proj save BF16 / no copy of their inputs, MXFP8 out_proj keeps MXFP8 weights."""
    from ledger.anatomy.mixers import LayerKind
    from ledger.errors import LedgerError
    from ledger.formats import bytes_per_element
    from ledger.frameworks.fp8 import weight_bytes
    from ledger.frameworks import of as framework_of
    from ledger.render.bridge import _config_spec

    nv4, mx8 = bytes_per_element("nvfp4"), bytes_per_element("mxfp8")
    assert dict(recipe("megatron", "fp4-nvfp4+quant-nemotronh").module_formats) == {
        "qkv": "bf16", "attn_out": "bf16", "latent": "bf16", "mamba_out": "mxfp8"}
    with pytest.raises(LedgerError):
        recipe("megatron", "fp4-nvfp4+quant-nosuch")
    model = _config_spec("nemotron-3-super").with_seq(4096)
    low = ParallelConfig(dp=8, zero_stage=1, framework="megatron", precision="fp4-nvfp4")
    quant = replace(low, precision="fp4-nvfp4+quant-nemotronh")
    attn, mamba = LayerKind("attention", "none", None), LayerKind("mamba", "none", None)
    h, tokens = model.hidden, 4096
    gap = layer_activation_bytes(model, quant, attn) - layer_activation_bytes(model, low, attn)
    # qkv's input kept in BF16 instead of NVFP4; the projection reads flash's own output
    assert gap == pytest.approx(tokens * (h * (2 - nv4) - model.heads * model.v_head_dim * nv4))
    w = [weight_bytes(model, c, framework_of(c), [1], [mamba]) for c in (low, quant)]
    assert w[1] - w[0] == pytest.approx(model.mamba.inner * h * 2 * (mx8 - nv4))


def test_a_megatron_launch_with_te_cross_entropy_prices_it(tmp_path):
    """--cross-entropy-loss-fusion --cross-entropy-fusion-impl te: TE's parallel
    cross-entropy (2 B a bf16 logit at its backward); native: Megatron-Core's compiled
    fused one (fused_cross_entropy.py, 10 B)."""
    from ledger.io.megatron.reader import read_launch

    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
              "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
              "--micro-batch-size 1 --global-batch-size 64 --use-distributed-optimizer --bf16 "
              "--vocab-size 128000 --tokenizer-type NullTokenizer --swiglu "
              "--ffn-hidden-size 14336 --normalization RMSNorm --cross-entropy-loss-fusion "
              "--cross-entropy-fusion-impl {impl}\n")
    got = {}
    for impl in ("te", "native"):
        path = tmp_path / f"{impl}.sh"
        path.write_text(launch.format(impl=impl))
        read = read_launch(str(path))
        got[impl] = read.flags.get("loss")
        assert not read.unpriced and "--cross-entropy-fusion-impl " + impl in " ".join(
            read.applied)
    assert got == {"te": "te-parallel", "native": "vocab-parallel-fused"}
    # --disable-jit-fuser leaves the native loss compiled (its @jit_fuser ran at import,
    # before Megatron reads the flag: pretrain_gpt.py L45, global_vars.py L178-179
    # @ d98e8a64); the flag stays named for what it does change
    path = tmp_path / "nojit.sh"
    path.write_text(launch.format(impl="native").replace("\n", " --disable-jit-fuser\n"))
    read = read_launch(str(path))
    assert read.flags.get("loss") == "vocab-parallel-fused"
    assert read.unpriced == ("--disable-jit-fuser",)


def test_bf16_layers_sit_where_the_split_puts_them():
    """Llama 3 8B's 32 layers over PP 2 (16 + 16): the first layer on rank 0, the last
    20 on rank 1 (16) and rank 0 (4)."""
    from ledger.frameworks import of as framework_of
    from ledger.placement.bf16_layers import bf16_kinds

    model = preset("llama3-8b")
    cfg = ParallelConfig(dp=4, pp=2, zero_stage=1, framework="megatron",
                         precision="fp8-tensorwise+bf16-ends-1-20")
    fw = framework_of(cfg)
    held = [sum(bf16_kinds(model, fw, r, 2, 1, "1f1b", [16, 16]).values()) for r in (0, 1)]
    assert held == [5, 16]


@pytest.mark.parametrize("precision", ["fp8-tensorwise", "fp8-tensorwise+bf16-ends-1-2"])
def test_the_planner_prices_low_precision_weights_as_report(precision):
    """Issue 31's 'the planner and report agree': the planner's memory of a placement
    under an FP8 recipe is report's (the recipe's weight copies and its BF16 layers);
    before, the grid left the FP8 copies out (76.9 vs 91.1 GiB here)."""
    from ledger.plan.search import Pins, plan
    from ledger.system import system

    model, sysm = preset("llama3-8b").with_seq(4096), system("h100-sxm")
    best = plan(model, 16, sysm, 256, top=2, precision=precision,
                pins=Pins(zero=1, tp=1, pp=1, micro_batch=1)).plans
    for p in best:
        report = place(model, p.config, gpu=sysm.gpu).memory_by_rank
        assert p.memory_bytes == pytest.approx(max(m.required_bytes for m in report))
