"""Hybrid stacks: Mamba-1/2, Gated DeltaNet, Kimi Delta Attention, lightning attention and
short convolutions beside (or instead of) attention.

Parameters are held to transformers' own build here on small configs with options the
default configs do not exercise (tests/test_corpus.py holds every default); the saved
bytes, FLOPs, TP/CP splits and collectives to hand arithmetic from the kernels' and
Megatron-Core's code (ledger.arch.recurrent, ledger.placement.splits cite the lines); the
commands run end to end on the released families' default shapes.
"""
import json

import pytest

from ledger.arch import layer_activations, model_flops_per_token
from ledger.arch.recurrent import core_flops_per_token
from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.io import spec_from_dict
from ledger.anatomy.mixers import LayerKind, LinearAttention, Mamba
from ledger.model import ModelSpec
from ledger.placement import place, split_problem
from test_bad_input import run

corpus = pytest.importorskip("corpus")

TOKENS = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128, **TOKENS}
# small configs with the options a family's default leaves off
CASES = [
    {"model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128,
     "state_size": 8, "time_step_rank": 7, "use_bias": True, "use_conv_bias": False},
    {"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128,
     "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 16, "use_bias": True},
    {"model_type": "jamba", **SMALL, "num_hidden_layers": 6, "attn_layer_period": 3,
     "attn_layer_offset": 1, "expert_layer_period": 3, "expert_layer_offset": 2,
     "num_experts": 4, "mamba_dt_rank": 8, "mamba_d_state": 8, "mamba_proj_bias": True},
    {"model_type": "bamba", **SMALL, "attn_layer_indices": [1, 3], "mamba_n_heads": 8,
     "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 2},
    {"model_type": "nemotron_h", **SMALL, "layers_block_type": ["linear_attention", "mlp",
     "full_attention", "moe", "linear_attention", "moe"], "num_hidden_layers": 6,
     "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 16,
     "n_routed_experts": 4, "moe_intermediate_size": 32,
     "moe_shared_expert_intermediate_size": 48, "head_dim": 16},
    {"model_type": "nemotron_h", **SMALL, "hybrid_override_pattern": "M*-E",
     "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 16,
     "n_routed_experts": 4, "moe_intermediate_size": 32,
     "moe_shared_expert_intermediate_size": 48, "head_dim": 16},
    {"model_type": "granitemoehybrid", **SMALL, "layer_types": ["mamba", "attention"] * 2,
     "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "num_local_experts": 4,
     "shared_intermediate_size": 40},
    {"model_type": "falcon_h1", **SMALL, "mamba_d_ssm": 96, "mamba_n_heads": 6,
     "mamba_d_head": 16, "mamba_d_state": 16, "mamba_rms_norm": True},
    {"model_type": "qwen3_next", **SMALL, "num_experts": 4, "num_experts_per_tok": 2,
     "moe_intermediate_size": 24, "shared_expert_intermediate_size": 40, "head_dim": 16,
     "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
     "linear_value_head_dim": 24, "mlp_only_layers": [0]},
    {"model_type": "kimi_linear", **SMALL, "num_key_value_heads": 4, "linear_num_heads": 4,
     "linear_head_dim": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
     "v_head_dim": 16, "num_experts": 4, "moe_intermediate_size": 24,
     "num_experts_per_token": 2, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"],
     "layer_types": ["linear_attention", "full_attention"] * 2},
    {"model_type": "minimax", **SMALL, "num_local_experts": 4, "head_dim": 16,
     "layer_types": ["linear_attention", "full_attention", "linear_attention",
                     "full_attention"]},
    {"model_type": "lfm2", **SMALL, "num_key_value_heads": 2,
     "layer_types": ["conv", "full_attention", "conv", "conv"], "conv_bias": True,
     "conv_L_cache": 4, "block_ffn_dim_multiplier": 1.5, "block_multiple_of": 32},
]


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: c["model_type"])
def test_options_count_as_transformers_counts(cfg):
    pytest.importorskip("transformers")
    m = spec_from_dict(cfg)
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    total, active = corpus.counts(corpus.config(cfg["model_type"], **kw))
    assert m.params == total == sum(m.breakdown.values())
    if active is not None:
        assert m.active_params == pytest.approx(active, rel=1e-15)


def mamba2_toy(**kw) -> ModelSpec:
    """h 64, 2 Mamba-2 blocks without an MLP: inner 128 = 4 heads x 32, 2 groups, N 16."""
    mb = Mamba(version=2, inner=128, state=16, heads=4, groups=2, conv_kernel=4, chunk=8)
    return ModelSpec(name="toy", layers=2, hidden=64, heads=1, vocab=128, seq_len=32,
                     ffn_hidden=128, mixers=("mamba",) * 2, mamba=mb,
                     no_mlp_layers=(0, 1), **kw)


def test_mamba2_saved_bytes_as_megatron_keeps_them():
    """Per token: the fused LayerNorm+in_proj's input (64 x 2 B) and rstd (4 B) and its GEMM
    input (128 B); zxBCdt (128 + 192 + 4 = 324) and out_x, the norm's input and
    out_proj's input (3 x 128) in bf16: 708 x 2 = 1,416 B; one fp32 rstd per group: 8 B.
    1,684 B x 32 tokens = 53,888 B."""
    r = layer_activations(mamba2_toy(), micro_batch=1, kind=LayerKind("mamba", "none"))
    assert r.total_bytes == 53_888
    assert r.mixer_bytes == 1_424 * 32 and r.mlp_bytes == 0


def test_ssd_flops_per_token():
    """Conv 2 x 4 x 192 = 1,536; C B^T 2 Q N G = 2 x 8 x 16 x 2 = 512; per head
    2 Q P + 4 N P + 2 N P / Q = 512 + 2,048 + 128, x 4 heads = 10,752: 12,800."""
    assert core_flops_per_token(mamba2_toy(), "mamba") == 12_800


def test_model_flops_of_a_mamba_stack():
    """6 x (in_proj 64 x 324 + out_proj 128 x 64 per layer, 2 layers, + the output layer
    128 x 64) + 3 x 12,800 per layer: 6 x (2 x 28,928 + 8,192) + 76,800."""
    assert model_flops_per_token(mamba2_toy()) == 6 * (2 * 28_928 + 8_192) + 76_800


def test_splits_follow_megatron():
    m = mamba2_toy()
    assert split_problem(m, 2) is None and split_problem(m, 2, 2) is None
    assert split_problem(m, 8) == ("mamba_heads", "mamba_heads(4) is not divisible by tp(8)")
    assert split_problem(m, 4) == ("mamba_groups", "mamba_groups(2) is not divisible by tp(4)")
    assert split_problem(m, 1, 8)[1] == "mamba_heads(4) is not divisible by tp*cp(8)"
    m1 = ModelSpec(name="m1", layers=1, hidden=64, heads=1, vocab=8, seq_len=32,
                   ffn_hidden=128, mixers=("mamba",), no_mlp_layers=(0,),
                   mamba=Mamba(version=1, inner=128, state=8, dt_rank=4))
    assert split_problem(m1, 2)[0] == "tp" and split_problem(m1, 1, 2)[0] == "cp"
    with pytest.raises(LedgerError, match="no tensor-parallel form"):
        place(m1, ParallelConfig(tp=2))


def test_mamba2_context_parallel_all_to_alls():
    """cp 2: 16 tokens a rank; in_width 324 + inner 128 channels in bf16 = 14,464 B, of which
    an all-to-all sends half, forward and backward: 14,464 B a layer, 28,928 B a step."""
    pl = place(mamba2_toy(), ParallelConfig(cp=2))
    rows = [c for c in pl.comms if c.axis == "cp"]
    assert [(c.kind, c.bytes) for c in rows] == [("all_to_all", 28_928)]


def test_one_block_layers_issue_half_the_tp_collectives():
    """Nemotron-H's layers hold a mixer or an MLP: four of them move what two full layers
    move over TP."""
    mb = Mamba(version=2, inner=128, state=16, heads=4, groups=2)
    kw = dict(hidden=64, heads=4, vocab=128, seq_len=32, ffn_hidden=128)
    nemo = ModelSpec(name="n", layers=4, mixers=("mamba", "none", "attention", "none"),
                     no_mlp_layers=(0, 2), mamba=mb, **kw)
    plain = ModelSpec(name="p", layers=2, **kw)
    cfg = ParallelConfig(tp=2)
    tp = [{(c.kind, c.bytes) for c in place(m, cfg).comms if c.axis == "tp"}
          for m in (nemo, plain)]
    assert tp[0] == tp[1]


def test_gated_deltanet_kinds_and_counts():
    la = LinearAttention(kind="gdn", key_heads=2, key_dim=16, value_heads=4, value_dim=24)
    m = ModelSpec(name="g", layers=4, hidden=64, heads=4, vocab=128, seq_len=64,
                  ffn_hidden=96, mixers=("linear", "linear", "linear", "attention"), linear=la)
    assert [m.layer_kind(i).mixer for i in range(4)] == ["linear"] * 3 + ["attention"]
    # in_proj 64 x (2 x 32 + 2 x 96 + 2 x 4) + conv (64 + 96) x 4 + dt_bias, A_log 2 x 4
    # + out_proj 96 x 64: split; the output norm over value_dim 24: replicated
    assert la.parts(64) == (64 * 264 + 160 * 4 + 8 + 96 * 64, 24)
    assert split_problem(m, 2) is None and split_problem(m, 1, 2) is None
    assert split_problem(m, 2, 2)[1] == "linear_key_heads(2) is not divisible by tp*cp(4)"


@pytest.mark.parametrize("model_type", ["jamba", "nemotron_h", "qwen3_next", "kimi_linear",
                                        "mamba2", "falcon_h1"])
def test_report_estimate_plan_run_end_to_end(tmp_path, model_type):
    pytest.importorskip("transformers")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(corpus.saved(corpus.config(model_type))))
    for argv in (["report", str(path), "--gpus", "64", "--global-batch", "64", "--zero", "1"],
                 ["estimate", str(path), "--gpus", "64", "--global-batch", "64", "--zero", "3"],
                 ["plan", str(path), "--gpus", "64", "--global-batch", "128", "--top", "1"]):
        code, out, err = run(argv)
        assert code in (0, 1) and "Traceback" not in err and out, (argv, err)


def test_global_layers_with_their_own_attention_shape():
    """MiMo-V2-Flash: sliding layers attend with 2 x the K/V heads and sinks, global ones
    without; K heads 192 wide, V heads 128 (modeling_mimo_v2_flash.py:339-360). Per layer
    q 64 x 192, k 8 x 192 / 4 x 192, v 8 x 128 / 4 x 128, o 64 x 128 over h = 4096."""
    pytest.importorskip("transformers")
    cfg = {"model_type": "mimo_v2_flash", "num_hidden_layers": 4, "hidden_size": 4096,
           "num_attention_heads": 64, "num_key_value_heads": 4, "intermediate_size": 96,
           "vocab_size": 128, "n_routed_experts": 4, "moe_intermediate_size": 32,
           "num_experts_per_tok": 2,
           "layer_types": ["sliding_attention", "full_attention"] * 2, **TOKENS}
    m = spec_from_dict(cfg)
    h = 4096
    local = h * (64 * 192 + 8 * 192 + 8 * 128) + 64 * 128 * h + 64
    full = h * (64 * 192 + 4 * 192 + 4 * 128) + 64 * 128 * h
    assert m.breakdown["attention"] == 2 * local + 2 * full
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    assert m.params == corpus.counts(corpus.config("mimo_v2_flash", **kw))[0]
