"""ledger.arch.activations: hand-worked figures per saved-tensor table, and measurements of
torch blocks (the project's plain block, torchtitan's llama3 block built from torch's own
modules) with saved-tensor hooks. transformers' layers: tests/test_hf_activations.py."""
import dataclasses

import numpy as np
import pytest

from ledger.arch import (HF, KORTHIKANTI, MEGATRON, TORCH, LayerActivations,
                         activation_bytes_per_layer, layer_activations,
                         llama_activation_bytes_per_layer, recompute_working_bytes, table)
from ledger.errors import LedgerError
from ledger.model import llama3_8b, llama3_405b, mixtral_8x7b

torch = pytest.importorskip("torch")

from ledger.verify.activations import CASES, measure, predict

# ---- hand arithmetic -----------------------------------------------------------------
# Llama 3 8B: h 4096, 32 heads, 8 K/V heads, head_dim 128, SwiGLU 14336; bf16, s 8192.
# Megatron/TE per token: each norm keeps its input (2h), fp32 rstd (4), its output (2h):
# 2 x 16388; attention q 8192 + k, v 2*8*128*2 = 4096 + out 8192 + fp32 lse 32*4 = 20608;
# SwiGLU fc1 output (2f) and swiglu output (f) in bf16: 3 * 14336 * 2 = 86016.
LLAMA8B_MEGATRON_PER_TOKEN = 2 * 16388 + 20608 + 86016  # 139400


def test_megatron_llama_by_hand():
    r = layer_activations(llama3_8b(), micro_batch=1, table=MEGATRON)
    assert (r.norms_bytes, r.attention_bytes, r.mlp_bytes) == (
        2 * 16388 * 8192, 20608 * 8192, 86016 * 8192)
    assert r.total_bytes == LLAMA8B_MEGATRON_PER_TOKEN * 8192
    tp8 = layer_activations(llama3_8b(), micro_batch=1, tp=8, table=MEGATRON)
    assert tp8.total_bytes == LLAMA8B_MEGATRON_PER_TOKEN * 8192 / 8  # SP: everything /t
    no_sp = layer_activations(llama3_8b(), micro_batch=1, tp=8, sequence_parallel=False,
                              table=MEGATRON)
    assert no_sp.norms_bytes == 2 * 16388 * 8192  # the residual stream stays whole
    cp2 = layer_activations(llama3_8b(), micro_batch=2, cp=2, table=MEGATRON)
    assert cp2.total_bytes == r.total_bytes  # b 2 over cp 2: the same tokens per GPU


def test_megatron_mixtral_by_hand():
    """Mixtral 8x7B (8 experts, top-2, SwiGLU 14336), s 4096, bf16: per token the same
    norms and attention as Llama 3 8B; router fp32 probs 8*4 + int64 top-2 2*8 + TE's
    int32 row_id_map 8*2*4 = 112; per routed token the permuted copy (2h), fc1 out + swiglu
    out (3f * 2) and the fp32 prob: 8192 + 86016 + 4, twice."""
    r = layer_activations(mixtral_8x7b(), micro_batch=1, table=MEGATRON)
    assert r.router_bytes == 112 * 4096
    assert r.experts_bytes == 2 * (8192 + 86016 + 4) * 4096
    assert r.total_bytes == (2 * 16388 + 20608 + 112 + 2 * (8192 + 86016 + 4)) * 4096
    padded = layer_activations(mixtral_8x7b(), micro_batch=1, capacity_factor=1.25,
                               table=MEGATRON)
    assert padded.experts_bytes == 1.25 * r.experts_bytes  # slots padded to capacity


def test_korthikanti_is_the_seed_figure():
    """The ideal convention keeps 34 sbh (+5as^2b) for every model, as the seed did: its
    2 sbh of dropout masks with GPT-3's dropout on (the ideal framework's default 0.1)."""
    sbh = 8192 * 16384
    r = layer_activations(llama3_405b(), micro_batch=1, tp=8, table=KORTHIKANTI, dropout=0.1)
    assert layer_activations(llama3_405b(), micro_batch=1, tp=8,
                             table=KORTHIKANTI).total_bytes == sbh * 32 / 8  # no masks
    assert r.total_bytes == sbh * 34 / 8 == 544 * 2**20
    kw = dict(seq_len=2048, micro_batch=1, hidden=12288, heads=96, tp=4)
    small = 2048 * 12288
    assert activation_bytes_per_layer(**kw, sequence_parallel=False) == small * (10 + 24 / 4)
    assert activation_bytes_per_layer(**kw, flash=False) == small * (34 + 5 * 96 * 2048 / 12288) / 4
    assert activation_bytes_per_layer(**kw, recompute="full") == small * 2 / 4


def test_hf_and_window_by_hand():
    """HF keeps 4 f-wide tensors, the fp32 upcast norm input and x_hat; eager keeps fp32
    probabilities and their bf16 cast over all s keys even with a window (measured in
    tests/test_hf_activations.py); Megatron keeps scores over the window only."""
    r = layer_activations(llama3_8b(), micro_batch=1, table=HF)
    assert r.mlp_bytes == 4 * 14336 * 2 * 8192
    assert r.norms_bytes == 2 * (4096 * 4 + 4 + 4096 * 2 + 4096 * 2) * 8192
    eager = layer_activations(llama3_8b(), micro_batch=1, seq_len=4096, flash=False,
                              table=HF, window=1024)
    assert eager.scores_bytes == 32 * (4 + 2) * 4096 * 4096
    mega = layer_activations(llama3_8b(), micro_batch=1, seq_len=4096, flash=False,
                             table=MEGATRON, window=1024)
    assert mega.scores_bytes == 32 * 2 * 4096 * 1024


def test_recompute_modes():
    full = layer_activations(llama3_8b(), micro_batch=1, tp=8, recompute="full", table=MEGATRON)
    assert full.total_bytes == 4096 * 2 * 8192 / 8  # the layer input, SP shard
    # one layer's backward: SwiGLU's 3 f-wide input gradients (product, silu, up) on the
    # TP shard; under full recompute also everything the layer saves but its kept input
    grads = 3 * 14336 * 2 * 8192 / 8
    assert recompute_working_bytes(llama3_8b(), micro_batch=1, tp=8, table=MEGATRON) == grads
    assert recompute_working_bytes(llama3_8b(), micro_batch=1, tp=8, table=MEGATRON,
                                   recompute="full") == (
        LLAMA8B_MEGATRON_PER_TOKEN * 8192 / 8 - 4096 * 2 * 8192 / 8 + grads)
    sel = layer_activations(llama3_8b(), micro_batch=1, flash=False, recompute="selective",
                            table=MEGATRON)
    assert sel.scores_bytes == 0
    with pytest.raises(LedgerError, match="recompute"):
        layer_activations(llama3_8b(), micro_batch=1, recompute="some")
    with pytest.raises(LedgerError, match="known: korthikanti"):
        table("deepspeed")


def test_grid_equals_single_placements():
    mb, tp, cp = np.array([1, 2, 4]), np.array([1, 2, 8]), np.array([1, 4, 2])
    for t in (MEGATRON, HF, KORTHIKANTI):
        grid = layer_activations(mixtral_8x7b(), micro_batch=mb, tp=tp, cp=cp, table=t,
                                 flash=False)
        one = [layer_activations(mixtral_8x7b(), micro_batch=int(m), tp=int(p), cp=int(c),
                                 table=t, flash=False).total_bytes for m, p, c in zip(mb, tp, cp)]
        assert np.array_equal(grid.total_bytes, one)
    assert isinstance(grid, LayerActivations)


# ---- measured: torch blocks ---------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("flash,recompute", [(True, "none"), (True, "full"), (False, "none"),
                                             (False, "selective"), (False, "full")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_plain_block_matches_measurement(case, flash, recompute, dtype):
    """The project's op-by-op block (ledger.verify.tiny.Block) against the PLAIN table."""
    got = measure(*case, flash=flash, recompute=recompute, dtype=dtype)
    want = predict(*case, flash=flash, recompute=recompute, dtype=dtype)
    assert got == want, (got, want)


@pytest.mark.parametrize("case", CASES[:3])
@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torchtitan_block_matches_torch_table(case, flash, dtype):
    """torchtitan's block from torch's own modules (nn.RMSNorm, SDPA with enable_gqa,
    silu). On CUDA nn.RMSNorm is aten::_fused_rms_norm (input + fp32 rstd: the TORCH
    table); this CPU build runs the composite instead, which keeps the fp32 upcast input
    and an fp32 x_hat: the one explained difference. Eager is the tiny block's own core,
    which also keeps its s x s boolean causal mask."""
    cpu = dataclasses.replace(TORCH, norm_input="fp32", norm_xhat="fp32",
                              eager_mask_bytes=0 if flash else 1)
    got = measure(*case, flash=flash, dtype=dtype, norm=torch.nn.RMSNorm)
    assert got == predict(*case, flash=flash, dtype=dtype, table=cpu)
    heads, kv, hidden, ffn, seq, b = case
    e = torch.tensor([], dtype=dtype).element_size()
    cuda = predict(*case, flash=flash, dtype=dtype, table=TORCH)
    mask = 0 if flash else seq * seq
    assert got - cuda == 2 * seq * b * hidden * (4 - e + 4) + mask


def test_gqa_and_recompute_move_the_number_the_right_way():
    mha = measure(4, 4, 64, 128, 16, 2)
    gqa = measure(4, 1, 64, 128, 16, 2)
    assert gqa < mha  # K/V at fewer heads
    eager = measure(4, 2, 64, 128, 64, 1, flash=False)
    sel = measure(4, 2, 64, 128, 64, 1, flash=False, recompute="selective")
    full = measure(4, 2, 64, 128, 64, 1, flash=False, recompute="full")
    assert full < sel < eager
    assert full == 64 * 64 * 4  # the layer input only


def test_llama_wrapper_keeps_its_figure():
    assert llama_activation_bytes_per_layer(
        seq_len=16, micro_batch=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
        ffn_hidden=128, act_bytes=4) == 140032  # measured (tiny.Block, fp32)


def test_stage_sums_each_kind_of_layer():
    """A stage of layers 0..3 of a model whose first layer is dense: 1 dense + 3 MoE."""
    m = dataclasses.replace(mixtral_8x7b(), first_dense_layers=1)
    from ledger.arch import layers_activation_bytes

    dense = layer_activations(m, micro_batch=1, moe=False).total_bytes
    moe = layer_activations(m, micro_batch=1, moe=True).total_bytes
    assert layers_activation_bytes(m, range(0, 4), micro_batch=1) == dense + 3 * moe
    assert layers_activation_bytes(m, range(4, 8), micro_batch=1) == 4 * moe


def test_megatron_recompute_modules_by_hand():
    """DeepSeek-V3's MoE layer under Megatron's table, TP 1, one 4096-token sequence:
    each --recompute-modules entry drops exactly what it runs again (transformer_config.py
    L560-583 @d98e8a64): mla_up_proj the up-projected q (192 wide), k (192) and v (128) of
    128 heads and the latent norms' outputs and fp32 rstd (kv 512, q 1536 wide; the
    latents themselves are the checkpoint's input); moe_act the experts' f-wide activation output per routed row (8 x 2048);
    layernorm the separate norms' outputs (MLA's input norm, the MoE pre-MLP norm: 7168
    each); shared_experts the shared expert's fc1 and fc2 inputs (3 x 2048); moe every
    MoE tensor beyond the pre-MLP norm's output."""
    from ledger.model import deepseek_v3

    m, t = deepseek_v3(), 4096

    def kept(*mods):
        return layer_activations(m, micro_batch=1, table=MEGATRON, recompute="selective",
                                 modules=mods, layer=10)

    base = kept("core_attn")
    assert base.total_bytes - kept("mla_up_proj").total_bytes == \
        (128 * (192 + 192 + 128) * 2 + (512 + 1536) * 2 + 2 * 4) * t
    assert base.total_bytes - kept("moe_act").total_bytes == 8 * 2048 * 2 * t
    assert base.total_bytes - kept("layernorm").total_bytes == 2 * 7168 * 2 * t
    assert base.total_bytes - kept("shared_experts").total_bytes == 3 * 2048 * 2 * t
    moe = kept("moe")
    assert moe.router_bytes == moe.experts_bytes == moe.shared_experts_bytes == 0
    assert kept().scores_bytes == 0  # flash: nothing materialised either way
    with pytest.raises(LedgerError, match="recompute_modules"):
        from ledger.config import ParallelConfig
        ParallelConfig(recompute="full", recompute_modules=("mlp",))


@pytest.mark.parametrize("q_lora", [1536, None])
def test_mla_gemm_widths_are_transformers_linears(q_lora):
    """Each MLA GEMM the op policy walks has the in/out width of transformers' own
    DeepseekV3Attention Linear (on the meta device), with and without a q LoRA rank
    (DeepSeek-V2-Lite has none). The q up-projection is heads x (nope + rope) wide."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import dataclasses

    from ledger.arch.checkpointing import matmuls
    from ledger.arch.saved_tensors import table
    from ledger.frameworks import of
    from ledger.config import ParallelConfig
    from ledger.model import deepseek_v3
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

    m = dataclasses.replace(deepseek_v3(), q_lora_rank=q_lora)
    conf = transformers.DeepseekV3Config(q_lora_rank=q_lora)
    with torch.device("meta"):
        attn = hf.DeepseekV3Attention(conf, layer_idx=0)
    linears = [attn.q_a_proj, attn.q_b_proj] if q_lora else [attn.q_proj]
    linears += [attn.kv_a_proj_with_mqa, attn.kv_b_proj, attn.o_proj]
    t = table(of(ParallelConfig(framework="torchtitan")).activations)
    ours = [(w, k) for part, _, w, _, k in matmuls(m, t, moe=True) if part == "attention"]
    assert ours == [(lin.out_features, lin.in_features) for lin in linears]
