"""Megatron-Core keeps an MoE layer's pre-MLP norm output under Transformer Engine's router
CUDA graph even when ``layernorm`` is recomputed (transformer_layer.py L481-527 @d98e8a64):
``ledger.frameworks.recompute_modules.pre_mlp_norm_recomputed`` and what it changes."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ledger.anatomy.mixers import LayerKind
from ledger.frameworks.recompute_modules import pre_mlp_norm_recomputed
from ledger.placement.layers import layer_activation_bytes
from ledger.validation.memory_mcore import table5

MOE = SimpleNamespace(shared_experts=0, moe_latent=None)


def _cfg(scopes, local=False, overlap=False):
    return SimpleNamespace(cuda_graph=scopes, cuda_graph_local=local,
                           shared_expert_overlap=overlap)


@pytest.mark.parametrize("scopes, local, dispatcher, model, overlap, kept", [
    ((), False, "flex", MOE, False, True),  # no graphs: recomputed
    (("attn",), False, "flex", MOE, False, True),  # the router not captured
    (("attn", "moe_router", "moe_preprocess"), False, "flex", MOE, False, False),
    (("attn", "moe_router"), False, "alltoall", MOE, False, False),  # no preprocess graph
    (("attn", "moe_router", "moe_preprocess"), False, "alltoall", MOE, False, True),
    (("attn", "moe_router", "moe_preprocess"), True, "flex", MOE, False, True),  # local impl
    (("attn", "mlp", "mamba", "moe_router", "moe_preprocess"), False, "flex", MOE, False,
     True),  # the whole layer: Megatron's empty module list names no router
    (("moe_router", "moe_preprocess"), False, "flex",
     SimpleNamespace(shared_experts=0, moe_latent=1024), False, True),  # LatentMoE
    (("moe_router", "moe_preprocess"), False, "alltoall",
     SimpleNamespace(shared_experts=1, moe_latent=None), True, False),  # overlapped shared
    (("moe_router", "moe_preprocess"), False, "alltoall",
     SimpleNamespace(shared_experts=1, moe_latent=None), False, True),
])
def test_the_rule_reads_as_megatrons_branches(scopes, local, dispatcher, model, overlap, kept):
    assert pre_mlp_norm_recomputed(model, _cfg(scopes, local, overlap), dispatcher) is kept


def test_table5_qwen_keeps_the_norm_output_of_each_moe_layer():
    """Table 5's Qwen3-235B TP2 EP16 baseline runs layernorm recompute, the flex dispatcher
    and TE graphs of attn, moe_router, moe_preprocess: each MoE layer keeps the pre-MLP
    norm's output, the SP shard of 3 x 4,096 tokens over TP 2, 4,096 wide, as the GEMM
    input the recompute would have dropped (MXFP8: 1 B + one E8M0 scale per 32)."""
    row = next(r for r in table5() if r.label.startswith("Qwen3-235B TP2"))
    moe = LayerKind("attention", "moe", None)
    kept = layer_activation_bytes(row.model, row.cfg, moe)
    local = layer_activation_bytes(row.model, replace(row.cfg, cuda_graph_local=True), moe)
    eager = layer_activation_bytes(row.model, replace(row.cfg, cuda_graph=()), moe)
    assert local == eager
    assert kept - eager == 3 * 4096 // 2 * 4096 * (1 + 1 / 32)
    dense = LayerKind("attention", "dense", None)  # TE fuses a dense MLP's norm: unchanged
    assert layer_activation_bytes(row.model, row.cfg, dense) == layer_activation_bytes(
        row.model, replace(row.cfg, cuda_graph=()), dense)


def test_the_megatron_reader_and_the_cli_carry_the_local_impl(tmp_path):
    from ledger.cli.args import build_parser
    from ledger.cli.step_flags import step_flags
    from ledger.io.megatron.reader import read_launch

    flags = tmp_path / "qwen.flags"
    text = ("--num-layers 48 --hidden-size 2048 --num-attention-heads 32 "
            "--group-query-attention --num-query-groups 4 --kv-channels 128 "
            "--ffn-hidden-size 6144 --seq-length 4096 --max-position-embeddings 4096 --swiglu "
            "--normalization RMSNorm --disable-bias-linear "
            "--untie-embeddings-and-output-weights --num-experts 128 --moe-router-topk 8 "
            "--moe-ffn-hidden-size 768 --expert-model-parallel-size 8 --micro-batch-size 1 "
            "--global-batch-size 512 --bf16 --tokenizer-type NullTokenizer "
            "--vocab-size 151936 --cuda-graph-impl {} --cuda-graph-scope attn moe_router\n")
    flags.write_text(text.format("local"))
    assert read_launch(str(flags), gpus=8).flags["cuda_graph_impl"] == "local"
    flags.write_text(text.format("transformer_engine"))
    assert "cuda_graph_impl" not in read_launch(str(flags), gpus=8).flags
    a = build_parser().parse_args(["report", "qwen3-30b-a3b", "--cuda-graph-scope",
                                   "attn,moe_router", "--cuda-graph-impl", "local"])
    assert step_flags(a)["cuda_graph_local"] is True
    a = build_parser().parse_args(["report", "qwen3-30b-a3b", "--cuda-graph-scope", "attn"])
    assert step_flags(a)["cuda_graph_local"] is False


@pytest.mark.parametrize("argv,shown", [
    (["report", "llama3-8b", "--cuda-graph-impl", "local", "--cuda-graph-scope", "attn"],
     "--cuda-graph-impl local: llama3-8b has no MoE layer"),
    (["report", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--cuda-graph-impl", "local",
      "--cuda-graph-scope", "attn"], "--cuda-graph-impl local with --cuda-graph-scope attn"),
    (["report", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--cuda-graph-impl",
      "transformer_engine", "--cuda-graph-scope", "attn,mlp,mamba,moe_router,moe_preprocess"],
     "changes only a router graph")])
def test_the_impl_is_refused_where_it_changes_nothing(argv, shown):
    """As --ep-sms without the flex dispatcher: one line, exit 2."""
    from test_bad_input import run

    code, out, err = run(argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: cuda_graph_impl: ") and shown in err


def test_the_impl_alone_captures_whole_layers_as_megatron_does():
    """Megatron's --cuda-graph-impl without --cuda-graph-modules captures whole layers
    (cuda_graph_modules "full", transformer_config.py L1090 @d98e8a64; the reader's
    WHOLE_LAYER): the CLI alike, priced as the scopes spelled out."""
    from ledger.cli.args import build_parser
    from ledger.cli.step_flags import step_flags
    from ledger.frameworks.host_checks import WHOLE_LAYER
    from test_bad_input import run

    for impl in ("local", "transformer_engine"):
        a = build_parser().parse_args(["report", "llama3-8b", "--cuda-graph-impl", impl])
        assert step_flags(a)["cuda_graph"] == WHOLE_LAYER
    a = build_parser().parse_args(["report", "llama3-8b"])
    assert step_flags(a)["cuda_graph"] == ()
    alone = run(["report", "llama3-8b", "--cuda-graph-impl", "transformer_engine", "--json"])
    spelled = run(["report", "llama3-8b", "--cuda-graph-scope", ",".join(WHOLE_LAYER),
                   "--json"])
    none = run(["report", "llama3-8b", "--json"])
    assert alone[0] == 0 and alone[1] == spelled[1] != none[1]
