"""No flag is read as another (issue 34): argparse's prefix matching read ``--gpus`` as
``--gpus-per-node`` where a command has no ``--gpus`` (``layout ... --gpus 256`` drew one
256-GPU NVLink node; ``serve llama3-70b --gpus 8`` served on one GPU). Abbreviations are
refused; a flag a command does not take is one line naming the command's own flags."""
import pytest

from test_bad_input import run


@pytest.mark.parametrize("argv,flag,closest", [
    (["layout", "--tp", "8", "--pp", "4", "--dp", "4", "--cp", "2", "--ep", "8", "--gpus",
      "256"], "--gpus", "--gpus-per-node"),
    (["serve", "llama3-70b", "--gpus", "8", "--context", "8192"], "--gpus", "--gpu"),
    (["report", "llama3-8b", "--glob", "16"], "--glob", "--global-batch"),
    (["estimate", "llama3-8b", "--micro", "2"], "--micro", "--micro-batch"),
])
def test_a_flag_the_command_does_not_take_is_refused_naming_its_own(argv, flag, closest):
    code, out, err = run(argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    cmd = argv[0]
    assert err.startswith(f"error: usage: train-ledger {cmd} does not take {flag} (closest: ")
    assert closest in err.split("(closest: ")[1].split(")")[0]
    assert "; its flags: " in err


def test_layout_takes_its_own_flags_whole():
    import json

    code, out, err = run(["layout", "--tp", "8", "--gpus-per-node", "4", "--json"])
    assert code == 0 and json.loads(out)["gpus_per_node"] == 4


@pytest.mark.parametrize("argv", [
    ["schedule", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--json"],
    ["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--json"],
])
def test_schedule_takes_schedule_as_every_command_does(argv):
    import json

    code, out, err = run(argv)
    assert code == 0 and json.loads(out)["schedule"] == "1f1b"


def test_schedule_given_two_ways_must_agree():
    code, _, err = run(["schedule", "gpipe", "--schedule", "1f1b", "--pp", "4",
                        "--microbatches", "8"])
    assert code == 2 and "given twice: gpipe and --schedule 1f1b" in err
