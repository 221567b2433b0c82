"""--from-torchtitan: the model and placement a torchtitan job TOML gives (Llama 3 8B against
the published count, HSDP and looped pipelines, activation checkpointing, compile), what
it cannot express refused by name, and plan taking the job's size from the file."""
import json

import pytest

from test_importers import LLAMA3_8B, run, write


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
     "parallelism.fancy_knob are not JobConfig fields"),
    (("[optimizer]", "[float8]\nenable = true\n[optimizer]"), "[float8] are not JobConfig"),
    (('flavor = "8B"', 'flavor = "9B"'), "model.flavor '9B' is not a flavour of llama3"),
    (('name = "llama3"', 'name = "flux"'), "FLUX is a diffusion model, not a decoder LM"),
    (('flavor = "8B"', 'flavor = "8B"\nconverters = ["float8"]'),
     "model.converters ['float8'] are not registered at torchtitan 238fa9953e"),
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


@pytest.mark.parametrize("ac,want", [
    ('mode = "selective"', ("full", 2, False, "loss-parallel")),  # option "2": every 2nd block
    ('mode = "selective"\nselective_ac_option = "op"', ("selective", 1, False, "loss-parallel")),
    ('mode = "selective"\nselective_ac_option = "3"', ("full", 3, False, "loss-parallel")),
    ('mode = "none"\n[compile]\nenable = true', ("none", 1, True, "compiled")),
    ('mode = "none"\n[compile]\nenable = true\ncomponents = ["model"]',
     ("none", 1, True, "loss-parallel")),
    ('mode = "none"\n[parallelism]\ndisable_loss_parallel = true', ("none", 1, False, "eager")),
])
def test_torchtitan_activation_checkpointing_is_applied(tmp_path, ac, want):
    """torchtitan's selective AC is its op policy ('op') or every n-th block in full (a
    digit); [compile] compiles the blocks and, among its components, the loss; TP's loss is
    loss-parallel unless disabled - applied, not noted."""
    text = TITAN_8B.replace('mode = "full"', ac)
    if "disable" in ac:  # one [parallelism] table: the key goes into the one the file has
        text = TITAN_8B.replace('mode = "full"', 'mode = "none"').replace(
            "tensor_parallel_degree = 2",
            "tensor_parallel_degree = 2\ndisable_loss_parallel = true")
    f = write(tmp_path, "j.toml", text)
    code, out, err = run("report", "--from-torchtitan", f, "--gpus", "64", "--json")
    assert code == 0 and err == "", err
    cfg = json.loads(out)["config"]
    assert (cfg["recompute"], cfg["recompute_every"], cfg["compile"], cfg["loss"]) == want


def test_torchtitan_f7084_training_compile(tmp_path):
    """Before [compile] (f7084fc, config_manager.py:235) training.compile compiled the
    blocks and the loss."""
    text = TITAN_8B.replace('mode = "full"', 'mode = "none"').replace(
        "seq_len = 8192", "seq_len = 8192\ncompile = true")
    f = write(tmp_path, "j.toml", text)
    code, out, err = run("report", "--from-torchtitan", f, "--gpus", "64", "--vocab-size",
                         "128256", "--json")
    assert code == 0, err
    cfg = json.loads(out)["config"]
    assert (cfg["compile"], cfg["loss"]) == (True, "compiled")


def test_torchtitan_needs_the_world_for_a_leftover_shard(tmp_path):
    f = write(tmp_path, "j.toml", TITAN_8B)
    code, _, err = run("report", "--from-torchtitan", f)
    assert code == 2 and "data_parallel_shard_degree = -1 takes the ranks left over" in err


def test_plan_takes_the_job_size_from_a_file(tmp_path):
    f = write(tmp_path, "j.toml", TITAN_8B)
    code, out, _ = run("plan", "--from-torchtitan", f, "--gpus", "64", "--top", "1", "--json")
    d = json.loads(out)
    p = d["plans"][0]
    assert code == 0 and d["model"] == "torchtitan:llama3:8B"
    assert p["tp"] * p["cp"] * p["pp"] * p["dp"] == 64  # the world the file runs on
    assert p["micro_batch"] * p["num_microbatches"] * p["dp"] == 2 * 32  # its global batch
