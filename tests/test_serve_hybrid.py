"""Serving hybrid stacks: recurrent states, vLLM's hybrid pages and concurrency, weights.

Expected values are vLLM's formula worked by hand on its inputs (vllm-project/vllm at
9aaf83ef50: MambaStateShapeCalculator, _align_hybrid_block_size, the KV-cache groups; the
lines are cited in ledger.serve.state and ledger.serve.paging) and figures vLLM printed
for released models (tests/fixtures/serve/SOURCES.md). What transformers keeps is
tests/test_serve_hf_hybrid.py.
"""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.cli import main
from ledger.placement import stage_params
from ledger.io import from_hf_config, spec_from_dict
from ledger.serve import ServeConfig, layer_caches, serve, state_dtypes
from ledger.serve.comms import tp_reduces
from ledger.serve.paging import align_hybrid
from ledger.serve.weights import params_by_rank, vllm_mixer_parts
from ledger.system import system

ROOT = Path(__file__).resolve().parents[1]
QWEN3_NEXT = ROOT / "examples" / "qwen3-next-80b-a3b.json"
NEMOTRON = ROOT / "tests" / "fixtures" / "serve" / "nemotron-nano-9b-v2-shape.json"
GiB, MiB = 2**30, 2**20
H200 = system("h200")
TOKENS = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 128, **TOKENS}


def states(model, tp, *flags):
    return [c.state for c in layer_caches(model, range(model.layers), tp, 2,
                                          state_dtypes(model, *flags))]


# ---- vLLM's state shapes, by hand ------------------------------------------------
def test_gated_deltanet_state_of_qwen3_next_at_tp2():
    """conv (2 x 16 x 128 + 32 x 128) / 2 = 4,096 channels x (4 - 1) columns x 2 B =
    24,576 B; ssm 32 / 2 = 16 value heads x 128 x 128 x 2 B = 524,288 B: 548,864 B."""
    s = next(x for x in states(from_hf_config(QWEN3_NEXT), 2) if x is not None)
    assert [(t.name, t.shape, t.dtype) for t in s.tensors] == [
        ("conv", (4096, 3), "bfloat16"), ("ssm", (16, 128, 128), "bfloat16")]
    assert [t.bytes for t in s.tensors] == [24_576, 524_288] and s.bytes == 548_864


def test_mamba2_state_of_nemotron_nano_ssm_in_float32_by_default():
    """conv 128 x 80 + 2 x 8 x 128 = 12,288 channels x 3 x 2 B = 73,728 B; ssm 128 x 80 x
    128 = 1,310,720 elements, x 4 B = 5,242,880 B (vLLM keeps Nemotron-H's in float32 unless
    told), x 2 B = 2,621,440 B with --mamba-ssm-cache-dtype bfloat16."""
    m = from_hf_config(NEMOTRON)
    assert state_dtypes(m) == ("bfloat16", "float32")
    default = next(x for x in states(m, 1) if x is not None)
    bf16 = next(x for x in states(m, 1, "auto", "bfloat16") if x is not None)
    assert [t.shape for t in default.tensors] == [(12288, 3), (128, 80, 128)]
    assert (default.bytes, bf16.bytes) == (73_728 + 5_242_880, 73_728 + 2_621_440)


def test_mamba2_groups_replicated_when_tp_does_not_divide_one_group():
    """One group at tp 2: vLLM gives each rank the group (extra_groups_for_head_shards =
    tp - groups = 1): conv (inner 128 + 2 x 2 groups x 16) / 2 = 96 channels; 8 heads / 2."""
    m = spec_from_dict({"model_type": "bamba", **SMALL, "mamba_n_heads": 8, "mamba_d_head": 16,
                        "mamba_d_state": 16, "mamba_n_groups": 1, "attn_layer_indices": [1]})
    s = states(m, 2)[0]
    assert [t.shape for t in s.tensors] == [(96, 3), (4, 16, 16)]
    assert [t.shape for t in states(m, 1)[0].tensors] == [(160, 3), (8, 16, 16)]


def test_mamba1_kda_lightning_and_short_conv_states():
    """Jamba's Mamba-1 (inner 2 x 64, state 16, kernel 4) at tp 2: conv (64, 3), ssm (64, 16).
    Kimi Linear's KDA (4 heads of 16, kernel 4): three convs (64, 3) and a float32 state
    (4, 16, 16) whatever the flags say. MiniMax's lightning state (4 heads of 16): (4, 16, 16)
    in the conv dtype. LFM2's short convolution over 64 channels, L_cache 3: (64, 2)."""
    jamba = spec_from_dict({"model_type": "jamba", **SMALL, "attn_layer_period": 2,
                            "attn_layer_offset": 1, "num_experts": 0})
    assert [t.shape for t in states(jamba, 2)[0].tensors] == [(64, 3), (64, 16)]
    kimi = spec_from_dict({"model_type": "kimi_linear", **SMALL, "num_key_value_heads": 4,
                           "linear_num_heads": 4, "linear_head_dim": 16, "kv_lora_rank": 16,
                           "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                           "num_experts": 4, "moe_intermediate_size": 24,
                           "num_experts_per_token": 2,
                           "layer_types": ["linear_attention", "full_attention"] * 2})
    kda = states(kimi, 1, "auto", "bfloat16")[0]
    assert [(t.shape, t.dtype) for t in kda.tensors] == [((64, 3), "bfloat16")] * 3 + [
        ((4, 16, 16), "float32")]
    minimax = spec_from_dict({"model_type": "minimax", **SMALL, "num_local_experts": 4,
                              "head_dim": 16,
                              "layer_types": ["linear_attention", "full_attention"] * 2})
    assert [(t.shape, t.dtype) for t in states(minimax, 1, "float32")[0].tensors] == [
        ((4, 16, 16), "float32")]
    lfm2 = spec_from_dict({"model_type": "lfm2", **SMALL,
                           "layer_types": ["conv", "full_attention", "conv", "conv"]})
    assert [t.shape for t in states(lfm2, 1)[0].tensors] == [(64, 2)]


# ---- hybrid pages ---------------------------------------------------------------------
def test_qwen3_next_pages_and_concurrency_as_vllm_logged_them():
    """vLLM 0.10.2, Qwen3-Next-80B-A3B-Instruct at tp 2 on H200, 262,144 tokens (SOURCES.md):
    attention 2 x 1 head x 256 x 2 B = 1,024 B a token; state 548,864 B; block
    16 x cdiv(548,864, 16 x 1,024) = 16 x 34 = 544 tokens ("Setting attention block size to
    544 tokens"); page 544 x 1,024 = 557,056 B, the state padded by 8,192 / 548,864 = 1.49%.
    12 attention + 36 GDN layers: groups of 12, 1 + 3 of them. 44.59 GiB (as logged) //
    557,056 // 12 = 7,162 blocks; a request takes cdiv(262,144, 544) + 3 = 482 + 3 = 485:
    7,162 / 485 = 14.767, "14.77x". vLLM 0.10.2 logged the tokens as
    num_blocks // groups x block = 7,162 // 4 x 544 = 973,760."""
    m = from_hf_config(QWEN3_NEXT)
    cfg = ServeConfig(tp=2, context=262144, kv_cache_memory_bytes=int(44.59 * GiB))
    est = serve(m, cfg, H200)
    assert (est.engine.block_size, est.engine.state_page_bytes) == (544, 557_056)
    assert f"{100 * (557_056 - 548_864) / 548_864:.2f}" == "1.49"
    p = est.pool
    assert (p.page_bytes, p.groups, p.group_size) == (557_056, 4, 12)
    assert (p.num_blocks, p.blocks_per_request) == (7_162, 485)
    assert f"{p.max_concurrency:.2f}" == "14.77"
    assert p.num_blocks // p.groups * est.engine.block_size == 973_760
    assert est.kv_bytes_per_token == 12 * 1_024
    assert est.kv_bytes_per_sequence == 12 * 1_024 * 262_144 + 36 * 548_864


def test_qwen3_next_weights_as_vllm_logged_them():
    """"Model loading took 74.2812 GiB" per GPU at tp 2: the weights here plus the rotary
    cos/sin cache vLLM allocates beside them (262,144 positions of the release x 64 rotary
    dims x 2 B = 32 MiB, vllm/model_executor/layers/rotary_embedding/base.py:58-63), within
    1 MiB (the log's last digit is 0.1 MiB; fp32 buffers such as A_log are not counted)."""
    est = serve(from_hf_config(QWEN3_NEXT), ServeConfig(tp=2, context=8192), H200)
    rope = 262_144 * 64 * 2
    assert abs(est.weight_bytes_per_gpu + rope - 74.2812 * GiB) < 1 * MiB


def test_nemotron_nano_block_of_672_tokens_with_a_bf16_state():
    """Issue #24280: 672 tokens for Nemotron-Nano-9B-v2. Attention 2 x 8 x 128 x 2 B =
    4,096 B a token; state 73,728 + 2,621,440 = 2,695,168 B; 16 x cdiv(2,695,168, 65,536) =
    16 x 42 = 672. With the float32 state vLLM now keeps by default: 5,316,608 B,
    16 x cdiv(5,316,608, 65,536) = 16 x 82 = 1,312."""
    m = from_hf_config(NEMOTRON)
    bf16 = serve(m, ServeConfig(context=131072, mamba_ssm_cache_dtype="bfloat16"), H200)
    assert (bf16.engine.block_size, bf16.engine.state_page_bytes) == (672, 672 * 4096)
    default = serve(m, ServeConfig(context=131072), H200)
    assert default.engine.block_size == 1_312


def test_alignment_keeps_a_larger_block_and_needs_both_kinds():
    """A --block-size already above what the state needs stays; an attention-free stack
    and a stack without states are not aligned (interface.py:485-487, :608-609)."""
    m = from_hf_config(QWEN3_NEXT)
    caches = layer_caches(m, range(48), 2, 2)
    assert align_hybrid(caches, 1024) == (1024, 1024 * 1024)
    assert align_hybrid([c for c in caches if c.state is None], 16) == (16, None)
    assert align_hybrid([c for c in caches if c.state is not None], 16) == (16, None)


def test_pure_mamba_pool_one_block_a_sequence():
    """Mamba-2 (64 layers, inner 8,192, 128 heads of 64, 8 groups, state 128, kernel 4) on one
    GPU: state conv (8,192 + 2 x 8 x 128) x 3 x 2 = 61,440 B + ssm 128 x 64 x 128 x 2 =
    2,097,152 B = 2,158,592 B; one group of 64 layers; 10 GiB // 2,158,592 // 64 = 77
    blocks, 1 a request whatever its length: 77.00x."""
    m = spec_from_dict({"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
                        "vocab_size": 32000, **TOKENS})
    est = serve(m, ServeConfig(context=1_000_000, kv_cache_memory_bytes=10 * GiB), H200)
    p = est.pool
    assert (p.page_bytes, p.groups, p.group_size) == (2_158_592, 1, 64)
    assert (p.num_blocks, p.blocks_per_request, p.max_concurrency) == (77, 1, 77.0)
    assert est.kv_bytes_per_token == 0 and est.kv_bytes_per_sequence == 64 * 2_158_592


def test_falcon_h1_layers_hold_an_attention_and_a_state_page():
    """Every Falcon-H1 layer runs attention and Mamba-2: 4 layers give 4 attention specs and
    4 state specs, 2 groups of 4; a request holds cdiv(L, block) + 1 blocks."""
    m = spec_from_dict({"model_type": "falcon_h1", **SMALL, "mamba_d_ssm": 96,
                        "mamba_n_heads": 6, "mamba_d_head": 16, "mamba_d_state": 16})
    est = serve(m, ServeConfig(context=4096, kv_cache_memory_bytes=GiB), H200)
    # attention 2 x 2 x 16 x 2 = 128 B a token; state (96 + 2 x 16) x 3 x 2 + 6 x 16 x 16 x 2
    # = 768 + 3,072 = 3,840 B: block 16 x cdiv(3,840, 2,048) = 32
    assert est.engine.block_size == 32
    assert (est.pool.groups, est.pool.group_size) == (2, 4)
    assert est.pool.blocks_per_request == 4096 // 32 + 1


def test_nemotron_mlp_layers_keep_nothing():
    """Pattern M*-E: a Mamba layer, an attention layer, an MLP and an MoE layer: two caches,
    2 groups of 1; the MLP-only layers have no spec."""
    m = spec_from_dict({"model_type": "nemotron_h", **SMALL, "hybrid_override_pattern": "M*-E",
                        "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2,
                        "ssm_state_size": 16, "n_routed_experts": 4,
                        "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48,
                        "head_dim": 16})
    caches = layer_caches(m, range(4), 1, 2, state_dtypes(m))
    assert [c.kind for c in caches] == ["mamba2", "full", "none", "none"]
    est = serve(m, ServeConfig(context=1024, kv_cache_memory_bytes=GiB), H200)
    assert (est.pool.groups, est.pool.group_size) == (2, 1)


# ---- weights and collectives ------------------------------------------------------
def test_vllm_splits_the_mixers_megatron_keeps_whole():
    """Mamba-1 all split but its dt/B/C norms; KDA all but f_a_proj, g_a_proj (h x d each)
    and o_norm (d); lightning attention and LFM2's convolution all split; one Mamba-2 group
    whole on every rank: its B and C in_proj rows (2 x 16 x 64) and conv channels
    (2 x 16 x (4 + 1))."""
    jamba = spec_from_dict({"model_type": "jamba", **SMALL, "attn_layer_period": 2,
                            "attn_layer_offset": 1, "num_experts": 0, "mamba_d_state": 16})
    # h 64, inner 128, N 16, kernel 4, dt rank 4: in_proj 64 x 256 = 16,384, conv 128 x 4 +
    # 128 = 640, x_proj 128 x 36 = 4,608, dt_proj 4 x 128 + 128 = 640, A 128 x 16 = 2,048,
    # D 128, out_proj 128 x 64 = 8,192, norms 4 + 16 + 16 = 36: 32,676
    assert vllm_mixer_parts(jamba, "mamba", 2) == (32_640, 36)
    # a GPU of tp 2 holds 32,640 / 2 + 36 = 16,356 of each Mamba layer's 32,676 (Megatron's
    # split, the ledger's training placement, keeps them whole): 2 Mamba layers, 32,640 less
    served = params_by_rank(jamba, ServeConfig(tp=2, context=64))[0][0]
    trained = stage_params(replace(jamba, mtp_layers=0), ServeConfig(tp=2, context=64), [4])
    assert served - trained[0][0] == -2 * 16_320
    kimi = spec_from_dict({"model_type": "kimi_linear", **SMALL, "num_key_value_heads": 4,
                           "linear_num_heads": 4, "linear_head_dim": 16, "kv_lora_rank": 16,
                           "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                           "num_experts": 4, "moe_intermediate_size": 24,
                           "num_experts_per_token": 2})
    whole = 2 * 64 * 16 + 16
    assert vllm_mixer_parts(kimi, "linear", 2) == (kimi.linear.params(64) - whole, whole)
    bamba = spec_from_dict({"model_type": "bamba", **SMALL, "mamba_n_heads": 8,
                            "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 1})
    bc = 2 * 16 * 64 + 2 * 16 * (4 + 1)
    assert vllm_mixer_parts(bamba, "mamba", 2) == (bamba.mamba.params(64) - bc, bc)
    assert vllm_mixer_parts(bamba, "mamba", 1) == (bamba.mamba.params(64), 0)
    minimax = spec_from_dict({"model_type": "minimax", **SMALL, "num_local_experts": 4,
                              "head_dim": 16})
    assert vllm_mixer_parts(minimax, "linear", 2) == (minimax.linear.params(64), 0)


def test_tp_all_reduces_per_layer_kind():
    """Nemotron-H's M, *, -, E layers issue one all-reduce each (mixer or MLP alone);
    Falcon-H1's layers three (attention, Mamba-2, MLP); a plain layer two."""
    m = spec_from_dict({"model_type": "nemotron_h", **SMALL, "hybrid_override_pattern": "M*-E",
                        "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2,
                        "ssm_state_size": 16, "n_routed_experts": 4,
                        "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48,
                        "head_dim": 16})
    assert [tp_reduces(m.layer_kind(i)) for i in range(4)] == [1, 1, 1, 1]
    f = spec_from_dict({"model_type": "falcon_h1", **SMALL, "mamba_d_ssm": 96,
                        "mamba_n_heads": 6, "mamba_d_head": 16, "mamba_d_state": 16})
    assert tp_reduces(f.layer_kind(0)) == 3
    est = serve(m, ServeConfig(tp=2, context=1024), H200)
    assert est.stages[0].comms[0].calls == 4 + 1  # and the embedding's


# ---- the command line -------------------------------------------------------------
def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv,field", [
    ([str(QWEN3_NEXT), "--context", "8192", "--tp", "4", "--hybrid-kv-cache-manager", "off"],
     "hybrid_kv_cache_manager"),
    ([str(QWEN3_NEXT), "--context", "8192", "--tp", "4", "--hybrid-kv-cache-manager", "on"],
     "hybrid_kv_cache_manager"),
    (["llama3-8b", "--context", "8192", "--mamba-ssm-cache-dtype", "float32"],
     "mamba_ssm_cache_dtype"),
    ([str(QWEN3_NEXT), "--context", "8192", "--tp", "3"], "heads"),
])
def test_serve_refusals_are_one_line(argv, field, capsys):
    code, out, err = _run(["serve", *argv], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {field}"), err


def test_unserved_hybrid_family_is_refused(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "lfm3", **SMALL, "head_dim": 16}))
    code, out, err = _run(["serve", str(cfg), "--context", "1024"], capsys)
    assert code == 2 and "Lfm3ForCausalLM is not in vllm" in err and err.count("\n") == 1


def test_json_carries_the_state(capsys):
    code, out, _ = _run(["serve", str(QWEN3_NEXT), "--tp", "2", "--gpu", "h200", "--context",
                         "262144", "--kv-cache-memory-bytes", str(int(44.59 * GiB)), "--json"],
                        capsys)
    d = json.loads(out)
    assert code == 0 and d["engine"]["block_size"] == 544
    assert d["engine"]["state_page_bytes"] == 557_056
    gdn = next(x for x in d["layers"] if x["kind"] == "gdn")
    assert gdn["state_bytes"] == 548_864 and gdn["layers"] == 36
    assert gdn["state"]["transformers_bytes"] == 4096 * 4 * 2 + 16 * 128 * 128 * 4
    assert d["max_sequences"] == 14
