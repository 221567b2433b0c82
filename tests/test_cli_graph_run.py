"""--cuda-graph-impl / --cuda-graph-scope where Megatron would not run them
(``ledger.cli.graph_flags.check_graph_run``): off Megatron (torchtitan and DeepSpeed launch
no such per-layer graphs), and with --recompute full unless the graph is the full iteration
(Megatron-LM megatron/core/transformer/transformer_config.py L2854-2858 @d98e8a64: "full
recompute is only supported with full iteration CUDA graph."). One line, exit 2."""
import pytest

from test_bad_input import run

EST = ["estimate", "llama3-8b", "--tp", "2", "--dp", "4"]
PLAN = ["plan", "llama3-8b", "--gpus", "8", "--global-batch", "64"]
REFUSED = [  # (flags, field, what the line must show)
    ("--cuda-graph-impl local --recompute full", "cuda_graph_impl",
     "--cuda-graph-impl local with --recompute full"),
    ("--cuda-graph-scope attn --recompute full", "cuda_graph_scope",
     "--cuda-graph-scope attn with --recompute full"),
    ("--framework torchtitan --cuda-graph-impl local", "cuda_graph_impl",
     "--cuda-graph-impl local: torchtitan launches no Megatron CUDA graphs"),
    ("--framework deepspeed --cuda-graph-scope attn", "cuda_graph_scope",
     "--cuda-graph-scope attn: deepspeed launches no Megatron CUDA graphs"),
]


@pytest.mark.parametrize("cmd", [EST, PLAN], ids=["estimate", "plan"])
@pytest.mark.parametrize("flags,field,shown", REFUSED)
def test_refused_where_megatron_would_not_run_them(cmd, flags, field, shown):
    code, out, err = run(cmd + flags.split())
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {field}: ") and shown in err and "Traceback" not in err


@pytest.mark.parametrize("flags", ["--cuda-graph-scope full_iteration --recompute full",
                                   "--cuda-graph-impl local --recompute selective",
                                   "--cuda-graph-scope attn"])
def test_what_megatron_runs_is_accepted(flags):
    code, _, err = run(EST + flags.split())
    assert code == 0, err


def test_the_planner_searches_no_full_recompute_under_layer_graphs():
    """Recompute unpinned: under per-layer graphs every listed plan runs without full
    recompute (L2854-2858); under the full-iteration graph full recompute is searched."""
    import json

    for flags, full in (("--cuda-graph-impl local", False),
                        ("--cuda-graph-scope full_iteration", True)):
        code, out, err = run(PLAN + flags.split() + ["--top", "10000", "--json"])
        assert code == 0, err
        kinds = {r["recompute"] for r in json.loads(out)["plans"]}
        assert "none" in kinds and ("full" in kinds) == full, (flags, kinds)
