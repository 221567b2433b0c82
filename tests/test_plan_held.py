"""plan from a launch names, in one stderr line, what the launch sets that plan neither
holds nor searches (``ledger.cli.inputs.PLAN_NOT_HELD``: its grid prices no embedding-wgrad
deferral, micro-batch group or optimizer instances); estimate prices them and says nothing
of the kind."""
from pathlib import Path

from test_bad_input import run

ROOT = Path(__file__).parents[1]
EXTRA = {"--defer-embedding-wgrad-compute": "--defer-embedding-wgrad-compute",
         "--microbatch-group-size-per-virtual-pipeline-stage":
             "--num-layers-per-virtual-pipeline-stage 8 "
             "--microbatch-group-size-per-virtual-pipeline-stage 2",
         "--num-distributed-optimizer-instances": "--num-distributed-optimizer-instances 2"}
PINS = ("--gpus", "8", "--tp", "2", "--pp", "2", "--micro-batch", "1", "--recompute", "none",
        "--top", "1")


def _launch(tmp_path, extra: str) -> str:
    text = (ROOT / "examples" / "llama3_8b.sh").read_text().replace(
        "--bf16  # lr changes no byte", f"--bf16 {extra}")
    path = tmp_path / "launch.sh"
    path.write_text(text)
    return str(path)


def test_plan_names_the_launch_settings_it_does_not_hold(tmp_path):
    for flag, extra in EXTRA.items():
        f = _launch(tmp_path, extra)
        code, _, err = run(["plan", "--from-megatron", f, *PINS])
        assert code == 0, err
        held = [x for x in err.splitlines() if "held settings not searched" in x]
        assert len(held) == 1 and flag in held[0], err
        code, _, err = run(["estimate", "--from-megatron", f, "--gpus", "8"])
        assert code == 0 and "held settings" not in err, err
    code, _, err = run(["plan", "--from-megatron", _launch(tmp_path, ""), *PINS])
    assert code == 0 and "held settings" not in err, err
    both = _launch(tmp_path, " ".join(EXTRA.values()))
    code, _, err = run(["plan", "--from-megatron", both, *PINS])
    line = next(x for x in err.splitlines() if "held settings not searched" in x)
    assert all(flag in line for flag in EXTRA), line
