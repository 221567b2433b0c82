"""Selective recompute by module (Megatron's --recompute-modules) in the step: each module's
forward runs again, hand-counted on DeepSeek-V3 (config.json: 61 layers, the first 3
dense; hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64,
v 128; 256 experts, top 8, moe_intermediate 2048, 1 shared expert, intermediate 18432;
SwiGLU), and the seconds each module adds to the backward."""
import pytest

from ledger.config import ParallelConfig
from ledger.model import deepseek_v3, llama3_8b
from ledger.step import DEFAULT, estimate
from ledger.step.gemm import kind_gemms_s
from ledger.step.layer_time import layer_times
from ledger.step.recompute import rerun_flops_per_token
from ledger.system import system as get_system

H, L, DENSE, MOE = 7168, 61, 3, 58
Q_UP = 1536 * 128 * (128 + 64)  # q latent -> heads x (nope + rope)
KV_UP = 512 * 128 * (128 + 128)  # kv latent -> heads x (k nope + v)
EXPERT = 3 * H * 2048  # gate, up, down of one expert (and of the shared one)


@pytest.mark.parametrize("mods,flops", [
    # causal QK^T (q/k 192 wide) and PV (v 128 wide) over 2,048 keys on average, at s = 4096
    (("core_attn",), L * 2 * 128 * (192 + 128) * 2048),
    (("mla_up_proj",), 2 * L * (Q_UP + KV_UP)),
    (("mlp",), 2 * DENSE * 3 * H * 18432),  # the 3 dense layers' MLP
    (("moe",), 2 * MOE * (H * 256 + EXPERT + 8 * EXPERT)),  # router, shared, 8 routed
    (("shared_experts",), 2 * MOE * EXPERT),
    (("layernorm",), 0), (("moe_act",), 0),  # no GEMMs
    (("moe", "shared_experts"), 2 * MOE * (H * 256 + 9 * EXPERT)),  # shared counted once
])
def test_recomputed_modules_flops_by_hand(mods, flops):
    assert rerun_flops_per_token(deepseek_v3(), mods) == flops


def test_the_shared_experts_rerun_their_gate():
    """Qwen3-Next's shared expert carries a sigmoid gate (config.json: hidden 2048, 48
    layers all MoE, shared_expert_intermediate_size 512, 512 experts, top 10, moe 512,
    SwiGLU); Megatron's SharedExpertMLP.forward runs it (shared_experts.py L203-206
    @d98e8a64), inside the shared experts' checkpoint (moe_layer.py L517-530): 2 x (3 x
    2048 x 512 + 2048 x 1) per layer. The hand count beside the matrix list left the gate
    out (48 x 2 x 2048 fewer); both counts now read ledger.finetune.modules.layer."""
    from dataclasses import replace
    from pathlib import Path

    from ledger.io import read_hf_config

    m, _ = read_hf_config(Path(__file__).parent / "fixtures" / "hf" / "released"
                          / "qwen3-next-80b-a3b-instruct.json")
    shared = 3 * 2048 * 512 + 2048
    assert rerun_flops_per_token(m, ("shared_experts",)) == 48 * 2 * shared
    routed = 10 * 3 * 2048 * 512
    assert rerun_flops_per_token(m, ("moe",)) == 48 * 2 * (2048 * 512 + routed + shared)


def _cfg(model, modules, **kw):
    kw = {"tp": 2, "dp": 1, "ep": 1, "sequence_parallel": True} | kw
    return ParallelConfig(pp=1, micro_batch=1, num_microbatches=4, recompute="selective",
                          framework="megatron", recompute_modules=modules, **kw)


def _bwd(model, cfg):
    system = get_system("h100-sxm")
    links = {"tp": "nvlink", "cp": "nvlink", "ep": "nvlink", "pp": "nvlink"}
    lt = layer_times(model, cfg, system, links, DEFAULT)
    return lt, lt.backward("selective"), lt.backward("none")


def test_mlp_reruns_the_dense_mlp_gemms_and_its_tp_collectives():
    m = llama3_8b()
    cfg = _cfg(m, ("mlp",))
    lt, sel, none = _bwd(m, cfg)
    kind = next(iter(m.kind_counts))
    mlp = kind_gemms_s(m, kind, cfg, m.seq_len, get_system("h100-sxm").gpu, DEFAULT)["mlp"]
    assert sel["compute"] - none["compute"] == pytest.approx(mlp)  # not the attention core
    assert sel["tp_comm"] - none["tp_comm"] == pytest.approx(lt.tp_f / 2)  # its block's half
    assert sel["elementwise"] > none["elementwise"]


def test_core_attn_is_the_default_and_reruns_the_attention_core_only():
    m = llama3_8b()
    lt, default, none = _bwd(m, _cfg(m, None))
    assert default["compute"] - none["compute"] == pytest.approx(lt.attention)
    assert default["tp_comm"] == none["tp_comm"]
    _, named, _ = _bwd(m, _cfg(m, ("core_attn",)))
    assert named == default


def test_moe_act_and_layernorm_rerun_elementwise_passes_only():
    m = deepseek_v3()
    for mods in (("moe_act",), ("layernorm",)):
        _, sel, none = _bwd(m, _cfg(m, mods, ep=8, dp=8))
        assert sel["compute"] == none["compute"]
        assert sel["elementwise"] > none["elementwise"], mods


def test_moe_reruns_the_dispatchers_all_to_alls():
    m = deepseek_v3()
    lt, sel, none = _bwd(m, _cfg(m, ("moe",), ep=8, dp=8))
    assert lt.ep > 0
    assert sel["ep_comm"] == pytest.approx(2 * none["ep_comm"])
    shared = _bwd(m, _cfg(m, ("shared_experts",), ep=8, dp=8))[1]
    assert none["compute"] < shared["compute"] < sel["compute"]


def test_hardware_flops_follow_the_modules():
    m = llama3_8b()
    system = get_system("h100-sxm")
    base = estimate(m, _cfg(m, None, tp=8), system)
    mlp = estimate(m, _cfg(m, ("mlp",), tp=8), system)
    assert mlp.step_time_s > base.step_time_s
    # hardware less model FLOPs, per token of the step (8192 x 4 micro-batches, 8 GPUs)
    extra = (mlp.hardware_tflops_per_gpu - mlp.tflops_per_gpu) * 1e12 * 8 * mlp.step_time_s
    assert extra / (8192 * 4) == pytest.approx(rerun_flops_per_token(m, ("mlp",)))
    assert rerun_flops_per_token(m, ("mlp",)) == 2 * 32 * 3 * 4096 * 14336


def test_moe_act_reruns_the_glu_clamps_eager_passes():
    """gpt-oss's clamped GLU (swiglu_limit) runs its clamps inside the checkpointed
    activation: under moe_act its 4 forward passes over the fc1 output run again (tokens
    4096 x top 8 rows on this GPU, 2 x 2048 wide, bf16, on the 58 MoE layers of 61)."""
    from dataclasses import replace as _replace

    plain = deepseek_v3()
    clamped = _replace(plain, glu_clamp=7.0)
    cfg = _cfg(plain, ("moe_act",), tp=1, ep=8, dp=8, sequence_parallel=False)
    hbm = get_system("h100-sxm").gpu.hbm_bytes_per_s
    clamp_fwd = 58 / 61 * 4096 * 8 * 4 * (2 * 2048) * 2
    # the re-run adds exactly the clamp's forward passes to what the plain model re-runs
    _, sel_c, none_c = _bwd(clamped, cfg)
    _, sel_p, none_p = _bwd(plain, cfg)
    assert (sel_c["elementwise"] - none_c["elementwise"]) \
        - (sel_p["elementwise"] - none_p["elementwise"]) == pytest.approx(clamp_fwd / hbm)


def test_core_attn_rerun_sees_only_a_windows_keys():
    """gpt-oss's sliding-window layers re-run QK^T and PV over their 128-key window, not
    the whole causal prefix: its 18 global and 18 windowed layers at s = 4096 (review
    finding: every layer had been priced at the full sequence)."""
    from dataclasses import replace
    from pathlib import Path

    from ledger.io import from_hf_config

    m = from_hf_config(Path(__file__).parent.parent / "examples" / "gpt-oss-120b.json")
    m = m.with_seq(4096)
    assert (m.layers, m.sliding_window) == (36, 128)
    per_layer = 2 * m.heads * (m.head_dim + m.v_head_dim)
    windowed = sum(min(i + 1, 128) for i in range(4096)) / 4096  # keys a query sees
    full = (4096 + 1) / 2
    expected = per_layer * (18 * full + 18 * windowed)
    assert rerun_flops_per_token(m, ("core_attn",)) == pytest.approx(expected, rel=0.02)


def test_core_attn_does_not_rerun_a_mamba_mixers_scan():
    """A hybrid's selective core_attn checkpoints the attention core of its attention layers
    (attention.py L393-394, L495 @d98e8a64); Megatron-Core's Mamba mixer and layer
    checkpoint nothing (ssm/mamba_mixer.py, ssm/mamba_layer.py at the same commit), so the
    SSD forward is not run again: Nemotron 3 Nano's backward gains the attention core only."""
    from dataclasses import replace
    from pathlib import Path

    from ledger.io.hf.reader import read_hf_config
    from ledger.step.gemm import recurrent_core_s

    root = Path(__file__).parents[1]
    m, _ = read_hf_config(root / "src/ledger/validation/data/hf/nemotron-3-nano.json")
    m = replace(m, seq_len=8192)
    cfg = _cfg(m, ("core_attn",), tp=1, sequence_parallel=False)
    lt, sel, none = _bwd(m, cfg)
    scan = recurrent_core_s(m, cfg, 8192, get_system("h100-sxm").gpu, DEFAULT)
    assert scan > 0 and lt.recurrent == pytest.approx(scan)
    assert sel["compute"] - none["compute"] == pytest.approx(lt.attention - scan)
    assert sel["compute"] - none["compute"] < 0.5 * lt.attention  # the scan is most of it
    # full recompute runs the whole forward again, the scan included
    full = lt.backward("full")
    assert full["compute"] - none["compute"] == pytest.approx(lt.gemm + lt.attention)


@pytest.mark.parametrize("pp,vp,n", [(1, 1, 5), (1, 1, 32), (4, 2, 1), (4, 2, 3)])
def test_block_recompute_reruns_the_first_layers_of_each_chunk_only(pp, vp, n):
    """Megatron's --recompute-method block --recompute-num-layers n (transformer_block.py
    _checkpointed_forward) recomputes the first n layers of each model chunk: the step pays
    n / (layers / (pp vp)) of full recompute's extra forward, in its compute, its host time
    and its hardware FLOPs - as the memory model keeps (placement.layers.recomputed_share).
    Llama 3 8B: 32 layers; 4 chunks of 4 layers per rank at pp 4 vp 2."""
    from dataclasses import replace

    m, s = llama3_8b(), get_system("h100-sxm")
    base = ParallelConfig(dp=8 // pp, pp=pp, vp=vp, num_microbatches=8, precision="bf16",
                          schedule="interleaved" if vp > 1 else "1f1b", framework="megatron")
    none, full, block = (estimate(m, c, s) for c in (
        base, replace(base, recompute="full"), replace(base, recompute="full", recompute_layers=n)))
    share = min(n, 32 / (pp * vp)) / (32 / (pp * vp))
    for k in ("compute", "elementwise"):
        assert block.breakdown[k] - none.breakdown[k] == pytest.approx(
            share * (full.breakdown[k] - none.breakdown[k]), rel=1e-9)
    work = [e.hfu * e.step_time_s for e in (none, full, block)]  # hardware FLOPs / peak
    assert work[2] - work[0] == pytest.approx(share * (work[1] - work[0]), rel=1e-9)
