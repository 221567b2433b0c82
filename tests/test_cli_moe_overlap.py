"""The MoE overlaps Megatron-Core refuses (TransformerConfig.__post_init__,
megatron/core/transformer/transformer_config.py at d98e8a64): --moe-shared-expert-overlap
with --overlap-moe-expert-parallel-comm (L3039-3041), with a model's shared experts and
the allgather dispatcher (L1813, L1820-1826); --delay-wgrad-compute without
--overlap-moe-expert-parallel-comm (L3072-3076). The CLI refuses them in one line (exit 2)
and the Megatron launch reader with the same reason: one check
(``ledger.frameworks.host_checks.moe_overlap_problems``)."""
import json

import pytest

from test_bad_input import run

# a small MoE with one shared expert, EP 16 without a pipeline (where Megatron's combined
# 1F1B runs: transformer_config.py L3007-3011)
MODEL = ["custom", "--layers", "4", "--hidden", "1024", "--heads", "8", "--ffn", "4096",
         "--vocab", "32000", "--mlp", "swiglu", "--num-experts", "16", "--top-k", "2",
         "--moe-ffn", "512", "--gpus", "16", "--global-batch", "64", "--framework", "megatron"]
SHARED = ["--shared-experts", "1"]
CLI = ["estimate", *MODEL, *SHARED, "--ep", "16", "--zero", "1"]
LAUNCH = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --ffn-hidden-size 4096 "
          "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
          "--global-batch-size 64 --vocab-size 32000 --bf16 --tokenizer-type NullTokenizer "
          "--swiglu --num-experts 16 --moe-router-topk 2 --moe-ffn-hidden-size 512 "
          "--moe-shared-expert-intermediate-size 512 --expert-model-parallel-size 16 "
          "--use-distributed-optimizer")
REFUSED = [  # (flags, field, what the line must show)
    ("--moe-shared-expert-overlap --overlap-moe-expert-parallel-comm "
     "--moe-token-dispatcher-type alltoall", "shared_expert_overlap",
     "--moe-shared-expert-overlap with --overlap-moe-expert-parallel-comm"),
    ("--moe-shared-expert-overlap --moe-token-dispatcher-type allgather",
     "shared_expert_overlap", "needs the alltoall or flex dispatcher, got allgather"),
    ("--delay-wgrad-compute --moe-token-dispatcher-type alltoall", "delay_wgrad",
     "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm"),
]


@pytest.mark.parametrize("flags,field,shown", REFUSED)
def test_the_cli_refuses_what_megatron_refuses(flags, field, shown):
    code, out, err = run(CLI + flags.split())
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {field}: ") and shown in err and "Traceback" not in err
    assert "transformer_config.py L" in err  # the line Megatron refuses it at


@pytest.mark.parametrize("flags,field,shown", REFUSED)
def test_the_reader_refuses_it_with_the_same_reason(tmp_path, flags, field, shown):
    path = tmp_path / "launch.sh"
    path.write_text(f"{LAUNCH} {flags}\n")
    code, _, err = run(["estimate", "--from-megatron", str(path), "--gpus", "16"])
    assert code == 2 and "Megatron would refuse this launch" in err and shown in err
    cli = run(CLI + flags.split())[2].split(": ", 2)[2].strip()
    assert cli in err  # the same sentence: one check


def test_the_shared_experts_overlap_is_not_recomputed(tmp_path):
    """--recompute-modules shared_experts beside the shared experts' overlap
    (transformer_config.py L1991-1997): refused by the CLI and by the reader alike."""
    both = "--moe-shared-expert-overlap --moe-token-dispatcher-type alltoall".split()
    code, _, err = run(CLI + both + ["--recompute", "selective", "--recompute-modules",
                                     "shared_experts"])
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: shared_expert_overlap: --moe-shared-expert-overlap with "
                          "--recompute-modules shared_experts (transformer_config.py L1991")
    path = tmp_path / "launch.sh"
    path.write_text(f"{LAUNCH} {' '.join(both)} --recompute-granularity selective "
                    f"--recompute-modules shared_experts\n")
    code, _, err2 = run(["estimate", "--from-megatron", str(path), "--gpus", "16"])
    assert code == 2 and err.split(": ", 2)[2].strip() in err2
    code, _, err = run(CLI + both + ["--recompute", "selective", "--recompute-modules", "moe"])
    assert code == 0, err  # the MoE layer whole is another checkpoint
    code, _, err3 = run(["plan", *MODEL, *SHARED, "--moe-shared-expert-overlap",
                         "--recompute-modules", "shared_experts"])  # its selective rows
    assert code == 2 and err3.count("\n") == 1
    assert err3.startswith("error: shared_expert_overlap: --moe-shared-expert-overlap with "
                           "--recompute-modules shared_experts")


@pytest.mark.parametrize("flags", [
    "--moe-shared-expert-overlap --moe-token-dispatcher-type alltoall",
    "--delay-wgrad-compute --overlap-moe-expert-parallel-comm --moe-token-dispatcher-type "
    "alltoall",
])
def test_what_megatron_runs_is_accepted(flags, tmp_path):
    assert run(CLI + flags.split())[0] == 0
    path = tmp_path / "launch.sh"
    path.write_text(f"{LAUNCH} {flags}\n")
    code, _, err = run(["estimate", "--from-megatron", str(path), "--gpus", "16"])
    assert code == 0, err


def test_without_shared_experts_the_flag_does_nothing(tmp_path):
    """Megatron checks the dispatcher only under moe_shared_expert_intermediate_size
    (L1813): a model without shared experts runs the flag as a no-op. A launch file's is
    read so (it changes no priced number); typed, it is refused in one line, as
    --ep-overlap on a dense model is."""
    flags = ["--moe-shared-expert-overlap", "--moe-token-dispatcher-type", "allgather"]
    for cmd in (["estimate", *MODEL, "--ep", "16", "--zero", "1", *flags],
                ["plan", *MODEL, flags[0]], ["report", "llama3-8b", "--gpus", "8", *flags]):
        code, out, err = run(cmd)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith("error: shared_expert_overlap: --moe-shared-expert-overlap: ")
        assert "has no shared experts" in err
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH.replace("--moe-shared-expert-intermediate-size 512 ", "")
                    + " " + " ".join(flags) + "\n")
    code, _, err = run(["estimate", "--from-megatron", str(path), "--gpus", "16"])
    assert code == 0, err


def test_the_planner_keeps_each_row_to_one_of_them():
    """Unpinned, the planner runs Megatron's default - no EP overlap (the flag is off by
    default) - and keeps the shared experts' overlap; the EP overlap pinned, every plan
    runs it (no full recompute, which Megatron runs without it) and drops the shared
    experts' overlap (as it priced them: ledger.step.layer_comms); the pair pinned,
    Megatron's refusal. (Turned on wherever it could be, the EP overlap's host stall,
    ledger.step.host.stall_s, had this small model's best plans escape it by full
    recompute at 5 GiB of 80.)"""
    plan = ["plan", *MODEL, *SHARED]
    code, out, err = run(plan + ["--moe-shared-expert-overlap", "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert rows and not any(r["ep_overlap"] for r in rows)
    assert all(r["shared_expert_overlap"] for r in rows)
    assert not any(r["recompute"] == "full" for r in rows)
    code, out, err = run(plan + ["--ep-overlap", "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert rows and all(r["ep_overlap"] and not r["shared_expert_overlap"]
                        and r["recompute"] != "full" for r in rows)
    code, out, err = run(plan + ["--moe-shared-expert-overlap", "--no-ep-overlap", "--json"])
    assert code == 0 and all(r["shared_expert_overlap"] for r in json.loads(out)["plans"])
    code, _, err = run(plan + ["--moe-shared-expert-overlap", "--ep-overlap"])
    assert code == 2 and err.startswith("error: shared_expert_overlap: ")
    code, _, err = run(plan + ["--delay-wgrad-compute", "--no-ep-overlap"])
    assert code == 2 and err.startswith("error: delay_wgrad: ")


PINNED = [  # (pins beside --ep-overlap that no placement runs it under, what the line shows)
    ("--moe-token-dispatcher-type allgather", "the allgather dispatcher has no all-to-alls"),
    ("--framework torchtitan", "torchtitan does not overlap EP all-to-alls"),
    ("--recompute full", "full recompute runs the forward again"),
    ("--ep 1", "ep(1) has no all-to-alls"),
    ("--pp 2 --schedule 1f1b", "interleaved only, not 1f1b"),
]


@pytest.mark.parametrize("pins,shown", PINNED)
def test_the_planner_refuses_a_pin_no_placement_holds(pins, shown):
    """--ep-overlap pinned beside a pin it cannot run with (Megatron-LM
    transformer_config.py L3012-3023 @d98e8a64; torchtitan has no EP overlap): plan refuses
    in one line with estimate's sentence for the same pair, not rows without the overlap
    or 'no placement divides'."""
    plan = ["plan", *MODEL, "--ep-overlap", *pins.split()]
    code, out, err = run(plan)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: ep_overlap: ") and shown in err, err
    ep = [] if "--ep " in pins else ["--ep", "8" if "--pp" in pins else "16"]
    mb = ["--microbatches", "8"] if "--pp" in pins else []
    code, _, est = run(["estimate", *MODEL, "--ep-overlap", *ep, *mb, *pins.split()])
    assert code == 2 and est == err  # one check: the same line


def test_the_planner_keeps_the_pin_where_some_placement_holds_it():
    """The pin beside --pp 2 without a schedule: Megatron overlaps in interleaved
    pipelines (transformer_config.py L3007-3011), which every listed plan runs."""
    code, out, err = run(["plan", *MODEL, "--ep-overlap", "--pp", "2", "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert rows and all(r["ep_overlap"] and r["schedule"] == "interleaved" for r in rows)
