"""--from-megatron and --from-torchtitan: the model and placement a launch config gives,
checked against hand counts and the published Llama 3 8B count; what they cannot
express is refused by name."""
import contextlib
import io
import json

import pytest

from ledger.cli import main

LLAMA3_8B = 8_030_261_248  # Meta's released checkpoint (safetensors total)

MEGATRON_8B = """\
# Llama 3 8B, as a launch script passes it
torchrun --nproc_per_node 8 pretrain_gpt.py \\
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \\
    --num-attention-heads 32 --group-query-attention --num-query-groups 8 \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --position-embedding-type rope --swiglu --normalization RMSNorm \\
    --disable-bias-linear --untie-embeddings-and-output-weights \\
    --vocab-size 128256 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\
    --sequence-parallel --use-distributed-optimizer \\
    --micro-batch-size 1 --global-batch-size=128 --lr 3e-4 --bf16  # lr changes no byte
"""

TITAN_8B = """\
[job]
description = "Llama 3 8B"
[model]
name = "llama3"
flavor = "8B"
[optimizer]
lr = 3e-4
[training]
local_batch_size = 2
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 2
[activation_checkpoint]
mode = "full"
"""


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_megatron_llama3_8b(tmp_path):
    f = write(tmp_path, "llama.sh", MEGATRON_8B)
    code, out, err = run("report", "--from-megatron", f, "--gpus", "64", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["params"] == LLAMA3_8B and d["seq_len"] == 8192
    c = d["config"]
    # dp = 64 / (tp 2 * pp 2) = 16; m = 128 / (16 * 1) = 8; distributed optimizer = ZeRO-1
    assert (c["tp"], c["pp"], c["dp"], c["num_microbatches"], c["zero_stage"]) == \
        (2, 2, 16, 8, 1)
    assert c["sequence_parallel"] and d["framework"] == "megatron"


def test_megatron_defaults_by_hand(tmp_path):
    """GPT defaults: LayerNorm with bias, biased linears, 4h GELU MLP, tied embeddings,
    learned positions, vocab padded to 128. h = 64, 2 layers, s = 128, V = 100 -> 128:
    embedding 128*64 + positions 128*64 = 16384; per layer qkv 3*64*64 + 192, proj
    64*64 + 64, MLP 2*64*256 + 256 + 64, two LayerNorms 256: 49984; final norm 128.
    Total 16384 + 2*49984 + 128 = 116480."""
    f = write(tmp_path, "gpt.args", "--num-layers 2 --hidden-size 64 --num-attention-heads 4\n"
                                    "--seq-length 128 --max-position-embeddings 128 "
                                    "--vocab-size 100\n")
    code, out, _ = run("report", "--from-megatron", f, "--json")
    d = json.loads(out)
    assert code == 0 and d["params"] == 116_480
    assert not d["config"]["sequence_parallel"]  # Megatron's default is off


def test_megatron_swiglu_default_width(tmp_path):
    """--swiglu without --ffn-hidden-size: int(4h * 2/3 / 64) * 64 = 10880 at h = 4096;
    then params = embedding + output 2*4096*V + per layer 4*4096^2 + 3*4096*10880 + 2*4096
    (two RMSNorms), + final norm."""
    f = write(tmp_path, "a.args", "--num-layers 1 --hidden-size 4096 --num-attention-heads 32 "
                                  "--seq-length 1024 --position-embedding-type rope --swiglu "
                                  "--normalization RMSNorm --disable-bias-linear "
                                  "--untie-embeddings-and-output-weights --vocab-size 256")
    code, out, _ = run("report", "--from-megatron", f, "--json")
    expected = 2 * 4096 * 256 + 4 * 4096**2 + 3 * 4096 * 10880 + 2 * 4096 + 4096
    assert code == 0 and json.loads(out)["params"] == expected


@pytest.mark.parametrize("text,needle", [
    ("--num-layers 2 --frobnicate 3", "--frobnicate in {f} is not modelled by the ledger"),
    ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
     "--position-embedding-type relative", "--position-embedding-type relative"),
    (MEGATRON_8B + " --recompute-granularity full --recompute-method block "
     "--recompute-num-layers 2", "recomputes some layers only"),
    (MEGATRON_8B + " --cp-comm-type allgather", "--cp-comm-type allgather is not modelled"),
    ("--hidden-size 64", "has no --num-layers"),
    ("--num-layers two", "--num-layers must be an integer, got 'two'"),
    ("--num-layers", "--num-layers needs a value"),
])
def test_megatron_refuses_by_name(tmp_path, text, needle):
    f = write(tmp_path, "bad.args", text)
    code, out, err = run("report", "--from-megatron", f)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert needle.format(f=f) in err


def test_megatron_file_and_a_conflicting_flag(tmp_path):
    f = write(tmp_path, "llama.sh", MEGATRON_8B)
    code, _, err = run("report", "--from-megatron", f, "--tp", "4")
    assert code == 2 and "tp: given twice: 4 on the command line, 2 from" in err
    code, _, err = run("report", "llama3-8b", "--from-megatron", f)
    assert code == 2 and "model: 'llama3-8b' given twice" in err


def test_megatron_dropout_applied_with_a_note(tmp_path):
    f = write(tmp_path, "llama.sh", MEGATRON_8B + " --attention-dropout 0.0")
    code, _, err = run("report", "--from-megatron", f)
    assert code == 0 and err.startswith("warning: --attention-dropout 0.0 not applied")


def test_torchtitan_llama3_8b(tmp_path):
    f = write(tmp_path, "llama3_8b.toml", TITAN_8B)
    code, out, err = run("estimate", "--from-torchtitan", f, "--gpus", "64", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    c = d["config"]
    # shard = 64 / tp 2 = 32 -> FSDP (ZeRO-3) over 32; global batch = 2 * 32 = 64 sequences,
    # micro-batch = local batch 2 -> m = 64 / (32 * 2) = 1
    assert d["params"] == LLAMA3_8B and d["seq_len"] == 8192
    assert (c["tp"], c["dp"], c["zero_stage"], c["micro_batch"], c["num_microbatches"]) == \
        (2, 32, 3, 2, 1)
    assert c["recompute"] == "full" and c["framework"] == "torchtitan"


def test_torchtitan_hsdp_and_looped_pipeline(tmp_path):
    text = TITAN_8B.replace("data_parallel_shard_degree = -1",
                            "data_parallel_shard_degree = 4\ndata_parallel_replicate_degree = 2\n"
                            "pipeline_parallel_degree = 2\n"
                            "pipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                            "pipeline_parallel_microbatch_size = 1")
    f = write(tmp_path, "j.toml", text)
    code, out, err = run("report", "--from-torchtitan", f, "--json")
    assert code == 0, err
    c = json.loads(out)["config"]
    # world 2 * 4 * tp 2 * pp 2 = 32; HSDP shard group 4; looped: 2 stages per rank;
    # global = local 2 * dp 8 = 16, micro-batch 1 -> m = 16 / 8 = 2
    assert (c["dp"], c["hsdp_shard"], c["pp"], c["vp"], c["schedule"]) == \
        (8, 4, 2, 2, "interleaved")
    assert c["num_microbatches"] == 2


@pytest.mark.parametrize("change,needle", [
    (("tensor_parallel_degree = 2", "tensor_parallel_degree = 2\nfancy_knob = 1"),
     "parallelism.fancy_knob in {f} is not modelled"),
    (("[optimizer]", "[float8]\nenable = true\n[optimizer]"), "[float8] in {f} is not modelled"),
    (('flavor = "8B"', 'flavor = "debugmodel"'), "flavor 'debugmodel' has no preset"),
    (('mode = "full"', 'mode = "memory_budget"'), "mode 'memory_budget' is not modelled"),
    (("data_parallel_shard_degree = -1", "data_parallel_shard_degree = -1\n"
      "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"DualPipeV\""),
     "'DualPipeV' is not modelled"),
    (("seq_len = 8192", "seq_len = \"long\""), "training.seq_len must be an integer"),
])
def test_torchtitan_refuses_by_name(tmp_path, change, needle):
    f = write(tmp_path, "j.toml", TITAN_8B.replace(*change))
    code, out, err = run("report", "--from-torchtitan", f, "--gpus", "64")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert needle.format(f=f) in err


def test_torchtitan_selective_is_applied_and_said(tmp_path):
    f = write(tmp_path, "j.toml", TITAN_8B.replace('mode = "full"', 'mode = "selective"'))
    code, _, err = run("report", "--from-torchtitan", f, "--gpus", "64")
    assert code == 0 and "priced as the ledger's selective recompute" in err


def test_torchtitan_needs_the_world_for_a_leftover_shard(tmp_path):
    f = write(tmp_path, "j.toml", TITAN_8B)
    code, _, err = run("report", "--from-torchtitan", f)
    assert code == 2 and "data_parallel_shard_degree = -1 takes the ranks left over" in err


def test_plan_takes_the_job_size_from_a_file(tmp_path):
    f = write(tmp_path, "j.toml", TITAN_8B)
    code, out, _ = run("plan", "--from-torchtitan", f, "--gpus", "64", "--top", "1", "--json")
    d = json.loads(out)
    p = d["plans"][0]
    assert code == 0 and d["model"] == "llama3-8b"
    assert p["tp"] * p["cp"] * p["pp"] * p["dp"] == 64  # the world the file runs on
    assert p["micro_batch"] * p["num_microbatches"] * p["dp"] == 2 * 32  # its global batch


def test_megatron_without_a_world_size_says_so(tmp_path):
    f = write(tmp_path, "llama.sh", MEGATRON_8B)
    code, out, err = run("report", "--from-megatron", f, "--json")
    assert code == 0 and json.loads(out)["config"]["dp"] == 1
    assert err == ("warning: a Megatron launch does not hold its world size: dp = 1 here; "
                   "give --gpus N\n")


def test_megatron_expert_flags_reach_the_placement(tmp_path):
    """--expert-tensor-parallel-size and --moe-token-dispatcher-type change the EP bytes,
    so a launch file's values are applied, not dropped."""
    text = MEGATRON_8B + (" --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4"
                          " --expert-tensor-parallel-size 1 --moe-token-dispatcher-type allgather\n")
    code, out, err = run("report", "--from-megatron", write(tmp_path, "moe.sh", text),
                         "--gpus", "64", "--json")
    assert code == 0, err
    c = json.loads(out)["config"]
    assert (c["ep"], c["etp"], c["moe_dispatcher"]) == (4, 1, "allgather")


def test_megatron_embedding_and_loss_slots(tmp_path):
    """Llama 3 405B's layout: 126 layers + the embedding's and the loss's slots = 128 = 16
    ranks x 8 virtual stages of one layer (transformer_block.py L148-200); without the
    two flags Megatron refuses the split, and so does the reader."""
    model = ("--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 "
             "--num-attention-heads 128 --group-query-attention --num-query-groups 8 "
             "--seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
             "--swiglu --normalization RMSNorm --disable-bias-linear "
             "--untie-embeddings-and-output-weights --vocab-size 128256 --bf16 "
             "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
             "--sequence-parallel --use-distributed-optimizer --micro-batch-size 1 "
             "--global-batch-size 2048 --num-layers-per-virtual-pipeline-stage 1")
    slots = " --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
    code, out, err = run("report", "--from-megatron", write(tmp_path, "l.sh", model + slots),
                         "--gpus", "16384", "--json")
    assert code == 0, err
    c = json.loads(out)["config"]
    assert (c["pp"], c["vp"], c["dp"], c["num_microbatches"]) == (16, 8, 128, 16)
    code, out, err = run("report", "--from-megatron", write(tmp_path, "m.sh", model),
                         "--gpus", "16384", "--json")
    assert code == 2 and out == "" and err.startswith("error: from_megatron: 126 layer slots")


@pytest.mark.parametrize("extra, needle", [
    (" --num-layers-per-virtual-pipeline-stage 3",  # 8 layers per rank: Megatron asserts
     "--num-layers-per-virtual-pipeline-stage 3 does not divide the 8 layer slots per rank"),
    (" --num-layers-per-virtual-pipeline-stage 16", "does not divide the 8 layer slots"),
    (" --num-virtual-stages-per-pipeline-rank 3", "32 layer slots (32 layers) do not divide "
                                                  "over pp(4) * vp(3) = 12 stages"),
    (" --num-layers-per-virtual-pipeline-stage 0", "must be at least 1, got 0"),
    (" --num-virtual-stages-per-pipeline-rank 0", "must be at least 1, got 0"),
])
def test_megatron_virtual_stage_flags_are_checked(tmp_path, extra, needle):
    text = MEGATRON_8B.replace("--pipeline-model-parallel-size 2",
                               "--pipeline-model-parallel-size 4") + extra
    code, out, err = run("report", "--from-megatron", write(tmp_path, "v.sh", text),
                         "--gpus", "64")
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1, err
