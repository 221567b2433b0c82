"""``estimate --tokens / --phases`` and ``plan --tokens`` on the command line: the "run"
object, the phases file, launch files' checkpoint settings, and one-line refusals."""
import json
from pathlib import Path

import pytest

from ledger.cli import main

ROOT = Path(__file__).resolve().parents[1]
EST = ["estimate", "llama3-8b", "--gpus", "64", "--global-batch", "512"]
RUN_KEYS = {"tokens", "steps", "days", "gpu_hours", "energy_mwh", "cost_usd", "checkpoint",
            "failures", "goodput"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, (code, out, err)
    assert err.startswith("error: ") and "Traceback" not in err
    return err


def test_run_json_carries_the_issues_fields(capsys):
    code, out, _ = run(capsys, *EST, "--tokens", "1e12", "--json")
    r = json.loads(out)["run"]
    assert code == 0 and RUN_KEYS <= set(r) and r["cost_usd"] is None
    assert {"bytes", "bytes_per_gpu", "write_s", "interval_s"} <= set(r["checkpoint"])
    assert {"job_mtbf_s", "interruptions", "lost_s"} <= set(r["failures"])
    # the parts add up to the whole, as the text says
    assert r["train_s"] + r["checkpointing_s"] + r["failures"]["lost_s"] == \
        pytest.approx(r["wall_s"])
    assert r["gpu_hours"] == pytest.approx(r["wall_s"] * 64 / 3600)
    assert r["steps"] == -(-10**12 // (512 * 8192))


def test_price_pue_storage_and_interval(capsys):
    _, out, _ = run(capsys, *EST, "--tokens", "1e12", "--json", "--usd-per-gpu-hour", "2.5",
                    "--pue", "1.3", "--ckpt-GBps", "40", "--ckpt-interval", "500")
    r = json.loads(out)["run"]
    assert r["cost_usd"] == pytest.approx(2.5 * r["gpu_hours"])
    assert r["energy_mwh"] == pytest.approx(r["gpu_hours"] * 700 * 1.3 / 1e6)
    ck = r["checkpoint"]
    assert ck["write_s"] == pytest.approx(ck["bytes"] / 40e9) and ck["interval_steps"] == 500
    assert ck["storage_per_node"] is False


def test_async_save_blocks_for_the_copy_only(capsys):
    _, out, _ = run(capsys, *EST, "--tokens", "1e12", "--json", "--ckpt-async")
    ck = json.loads(out)["run"]["checkpoint"]
    assert ck["mode"] == "async" and ck["blocking_s"] == ck["d2h_s"] < ck["write_s"]
    err = refused(capsys, *EST, "--tokens", "1e12", "--ckpt-async", "--framework", "ideal")
    assert "ckpt_async: ideal has no asynchronous" in err
    err = refused(capsys, *EST, "--tokens", "1e12", "--ckpt-async", "--ckpt-interval", "1",
                  "--ckpt-GBps-per-node", "0.01")
    assert "ckpt_interval: 1 steps" in err and "asynchronous write" in err


def test_text_block(capsys):
    code, out, _ = run(capsys, *EST, "--tokens", "1e12", "--usd-per-gpu-hour", "2")
    lines = out.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("  whole run")))
    labels = [x.split()[0] for x in lines[start:] if x.startswith("    ") and x[4] != " "]
    assert labels == ["wall", "GPU-hours", "energy", "checkpoint", "failures", "goodput"]
    assert "cost $" in out and "Daly's optimum" in out


@pytest.mark.parametrize("flags,field", [
    (["--tokens", "nan"], "tokens"), (["--tokens", "-5"], "tokens"),
    (["--tokens", "1e30"], "tokens"), (["--tokens", "inf"], "tokens"),
    (["--tokens", "1e12", "--pue", "0.9"], "pue"),
    (["--tokens", "1e12", "--pue", "inf"], "pue"),
    (["--tokens", "1e12", "--usd-per-gpu-hour", "0"], "usd_per_gpu_hour"),
    (["--tokens", "1e12", "--usd-per-gpu-hour", "-1"], "usd_per_gpu_hour"),
    (["--tokens", "1e12", "--ckpt-GBps", "nan"], "ckpt_GBps"),
    (["--tokens", "1e12", "--ckpt-GBps-per-node", "0"], "ckpt_GBps_per_node"),
    (["--tokens", "1e12", "--ckpt-interval", "0"], "ckpt_interval"),
    (["--tokens", "1e12", "--gpu-mtbf-hours", "-3"], "gpu_mtbf_hours"),
    (["--tokens", "1e12", "--relaunch-min", "-1"], "relaunch_min"),
    (["--tokens", "1e12", "--relaunch-min", "1e9"], "relaunch_min"),
    (["--pue", "1.2"], "pue"), (["--ckpt-async"], "ckpt_async"),
    (["--usd-per-gpu-hour", "2"], "usd_per_gpu_hour"),
])
def test_bad_run_flags_are_one_line(capsys, flags, field):
    err = refused(capsys, *EST, *flags)
    assert err.startswith(f"error: {field}: ")


def test_a_run_failures_outpace_is_refused(capsys):
    err = refused(capsys, *EST, "--tokens", "1e12", "--gpu-mtbf-hours", "0.01")
    assert err.startswith("error: failures: the job stops every 1 s") and "never finish" in err


def test_tokens_and_phases_not_both(capsys, tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[[phase]]\ntokens = 1e9\n")
    assert "give --tokens or --phases" in refused(capsys, *EST, "--tokens", "1e9",
                                                    "--phases", str(p))


def test_phases_toml_and_json_agree(capsys, tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[[phase]]\nname = "short"\ntokens = 2e11\nseq_len = 4096\n'
                    'global_batch = 1024\n\n[[phase]]\nname = "long"\nsteps = 100\n'
                    'seq_len = 8192\nglobal_batch_tokens = 4194304\n'
                    'placement = { gpus = 32 }\n')
    js = tmp_path / "p.json"
    js.write_text(json.dumps({"phase": [
        {"name": "short", "tokens": 2e11, "seq_len": 4096, "global_batch": 1024},
        {"name": "long", "steps": 100, "seq_len": 8192, "global_batch_tokens": 4194304,
         "placement": {"gpus": 32}}]}))
    a = json.loads(run(capsys, *EST, "--phases", str(toml), "--json")[1])["run"]
    b = json.loads(run(capsys, *EST, "--phases", str(js), "--json")[1])["run"]
    assert a == b
    short, long = a["phases"]
    assert (short["steps"], short["gpus"], short["global_batch"]) == (-(-2e11 // (1024 * 4096)),
                                                                       64, 1024)
    assert (long["steps"], long["gpus"], long["global_batch"], long["seq_len"]) == \
        (100, 32, 512, 8192)
    assert a["steps"] == short["steps"] + 100


def test_a_bad_phases_file_says_everything_at_once(capsys, tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('[[phase]]\nseq_len = 0\ncolour = "red"\n\n[[phase]]\ntokens = -1\n'
                 'placement = { tp = 3, gpus = 7 }\n\n[[phase]]\nsteps = 1\n'
                 'placement = { dp = 4, gpus = 8 }\n')
    err = refused(capsys, *EST, "--phases", str(p))
    for part in ("phase[0] has unknown keys colour", "phase[0] needs tokens or steps",
                 "phase[0].seq_len must be an integer", "phase[1].tokens must be a finite",
                 "phase[1].placement: gpus(7) is not divisible by tp * cp * pp = 3",
                 "phase[2].placement: tp * cp * pp * dp = 4 != gpus(8)"):
        assert part in err, (part, err)


@pytest.mark.parametrize("text,part", [
    ("not toml [[", "is not valid TOML"), ("x = 1\n", "must hold a non-empty list 'phase'"),
    ("[[phase]]\ntokens = 1e9\nglobal_batch_tokens = 1000\n", "not a multiple of seq_len"),
    ("[[phase]]\ntokens = 1e9\nplacement = { pp = 3 }\n", "phase[0].placement"),
    ("[[phase]]\ntokens = 1e3\nrampup = [256, 16, 1000]\nglobal_batch = 512\n",
     "end inside the ramp"),
])
def test_malformed_phases(capsys, tmp_path, text, part):
    p = tmp_path / "p.toml"
    p.write_text(text)
    assert part in refused(capsys, *EST, "--phases", str(p))


def test_plan_ranks_by_time_to_train(capsys):
    argv = ["plan", "llama3-8b", "--gpus", "64", "--global-batch", "256", "--top", "5"]
    _, out, _ = run(capsys, *argv, "--tokens", "1e12", "--json")
    d = json.loads(out)
    walls = [p["run"]["wall_s"] for p in d["plans"]]
    assert d["ranked_by"] == "time_to_train" and walls == sorted(walls) and len(walls) == 5
    _, text, _ = run(capsys, *argv, "--tokens", "1e12")
    assert "ranked by time to train" in text and "goodput" in text
    _, plain, _ = run(capsys, *argv, "--json")
    assert json.loads(plain)["ranked_by"] == "step_time"
    assert "does not take --phases" in refused(capsys, *argv, "--phases", "x.toml")


def test_launch_files_checkpoint_settings_apply(capsys, tmp_path):
    sh = tmp_path / "l.sh"
    sh.write_text((ROOT / "examples" / "llama3_8b.sh").read_text().replace(
        "--lr 3e-4", "--save-interval 250 --async-save --lr 3e-4"))
    _, out, _ = run(capsys, "estimate", "--from-megatron", str(sh), "--gpus", "64",
                    "--tokens", "1e11", "--json")
    ck = json.loads(out)["run"]["checkpoint"]
    assert (ck["interval_steps"], ck["mode"]) == (250, "async")
    code, out, err = run(capsys, "estimate", "--from-megatron", str(sh), "--gpus", "64",
                         "--verbose")
    assert code == 0 and "--save-interval 250 --async-save" in err  # applied, said so
    # without --tokens the file's checkpoint settings change nothing and are not refused
    toml = tmp_path / "t.toml"
    toml.write_text((ROOT / "examples" / "llama3_8b.toml").read_text()
                    + '\n[checkpoint]\nenable = true\ninterval = 300\nasync_mode = "async"\n')
    _, out, _ = run(capsys, "estimate", "--from-torchtitan", str(toml), "--gpus", "64",
                    "--tokens", "1e11", "--json")
    ck = json.loads(out)["run"]["checkpoint"]
    assert (ck["interval_steps"], ck["mode"], ck["layout"]) == (300, "async", "torch DCP")


def test_a_fine_tunes_run_is_refused(capsys):
    """The run layer prices a pre-training checkpoint; a fine-tune's (adapters, frozen
    weights) is not modelled, so it is refused rather than priced wrong."""
    err = refused(capsys, *EST, "--finetune", "lora", "--tokens", "1e9")
    assert err.startswith("error: tokens: a whole run prices a pre-training checkpoint")


def test_plan_min_gpus_by_time_to_train(capsys):
    code, out, _ = run(capsys, "plan", "llama3-8b", "--min-gpus", "--global-batch", "64",
                       "--tokens", "1e10", "--top", "2", "--json")
    d = json.loads(out)
    gpus = d["gpus"]  # the smallest world that fits: one GPU fewer fits nothing
    assert code == 0 and d["ranked_by"] == "time_to_train" and gpus >= 2
    assert all(p["run"]["phases"][0]["gpus"] == gpus for p in d["plans"])
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpus", str(gpus - 1), "--global-batch",
                       "64", "--json")
    assert json.loads(out)["plans"] == []
