"""The command line: JSON round-trips, bad input is one line and exit status 2."""
import json
import subprocess
import sys

import pytest

from ledger.cli import main
from ledger.model import llama3_70b
from ledger.parallel import ParallelConfig, place


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_json_round_trips(capsys):
    code, out, _ = run(capsys, "report", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "32",
                       "--zero", "1", "--microbatches", "16", "--vp", "2", "--json")
    assert code == 0
    d = json.loads(out)
    pl = place(llama3_70b(), ParallelConfig(tp=8, pp=4, dp=32, zero_stage=1,
                                            num_microbatches=16, vp=2))
    assert d["model"] == "llama3-70b" and d["params"] == 70_553_706_496
    assert d["world"] == 1024
    assert d["per_gpu"] == {"params_bytes": pl.per_gpu.params_bytes,
                            "grads_bytes": pl.per_gpu.grads_bytes,
                            "optim_bytes": pl.per_gpu.optim_bytes,
                            "total_bytes": pl.per_gpu.total_bytes}
    assert d["bubble_fraction"] == pl.bubble_fraction
    assert d["activation_bytes_per_layer"] == pl.activation_bytes_per_layer
    assert [(c["axis"], c["kind"], c["link"], c["bytes"], c["overlap"]) for c in d["comms"]] == \
        [(c.axis, c.kind, c.link, c.bytes, c.overlap) for c in pl.comms]
    assert d["total_comm_bytes"] == pl.total_bytes()
    # the config in the JSON rebuilds the same placement
    cfg = dict(d["config"])
    cfg.pop("moe")
    assert place(llama3_70b(), ParallelConfig(**cfg)).comms == pl.comms


def test_megatron_spellings_and_derived_dp(capsys):
    code, out, _ = run(capsys, "report", "llama3-70b", "--tensor-model-parallel-size", "8",
                       "--pipeline-model-parallel-size", "4", "--gpus", "256",
                       "--global-batch-size", "512", "--use-distributed-optimizer", "--json")
    d = json.loads(out)
    assert (d["config"]["dp"], d["config"]["num_microbatches"], d["config"]["zero_stage"]) == \
        (8, 64, 1)


def test_custom_model_and_seq_override(capsys):
    code, out, _ = run(capsys, "report", "custom", "--layers", "2", "--hidden", "64",
                       "--heads", "4", "--ffn", "256", "--vocab", "100", "--mlp", "gelu",
                       "--tied", "--seq", "128", "--json")
    d = json.loads(out)
    assert code == 0 and d["seq_len"] == 128
    assert d["params"] == 100 * 64 + 2 * (4 * 64 * 64 + 2 * 64 * 256 + 2 * 64) + 64
    _, out, _ = run(capsys, "report", "llama3-8b", "--seq", "4096", "--json")
    assert json.loads(out)["seq_len"] == 4096


def test_models_lists_presets(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "405,853,388,800" in out and "mixtral-8x7b" in out


def test_report_from_config_json(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
                             "n_head": 12}))
    code, out, _ = run(capsys, "report", str(p), "--dp", "8", "--json")
    assert code == 0 and json.loads(out)["params"] == 124_439_808


BAD = [
    (["report", "gpt5"], "model"),
    (["report", "llama3-70b", "--tp", "3"], "heads(64) is not divisible by tp(3)"),
    (["report", "llama3-70b", "--tp", "-8"], "tp: must be an integer in 1..1,048,576, got '-8'"),
    (["report", "llama3-70b", "--zero", "4"], "zero: must be an integer in 0..3, got '4'"),
    (["report", "llama3-70b", "--gpus", "100", "--tp", "8"], "gpus(100)"),
    (["report", "llama3-70b", "--dp", "4", "--gpus", "16"], "!= gpus(16)"),
    (["report", "llama3-70b", "--dp", "3", "--global-batch", "16"], "global_batch(16)"),
    (["report", "llama3-70b", "--tp", "banana"], "tp: must be an integer in 1..1,048,576, got 'banana'"),
    (["report", "llama3-70b", "--frobnicate"], "report does not take --frobnicate"),
    (["report", "custom", "--layers", "2"], "custom needs"),
    (["report", "llama3-70b", "--seq", "-1"], "seq: must be an integer in 0..16,777,216, got '-1'"),
    (["report", "llama3-70b", "--capacity-factor", "-1"], "capacity_factor"),
    (["nonsense"], "invalid choice"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err


def test_malformed_config_json_from_a_real_process(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{oops")
    r = subprocess.run([sys.executable, "-m", "ledger", "report", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "not valid JSON" in r.stderr
    assert "Traceback" not in r.stderr


def test_python_m_ledger_parallel_runs_without_warnings():
    r = subprocess.run([sys.executable, "-W", "error", "-m", "ledger.parallel"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""
    assert "233.22 GiB" in r.stdout and "391.94 GiB" in r.stdout


def test_core_never_imports_torch():
    code = ("import sys, ledger.cli, ledger.parallel, ledger.io.hf, ledger.render;"
            "ledger.cli.run(['report','llama3-70b','--tp','8']);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_public_surface():
    import ledger
    assert set(ledger.__all__) == {
        "Comm", "LedgerError", "ModelSpec", "MoESpec", "ParallelConfig", "Placement",
        "StateBytes", "activation_bytes_per_layer", "coll_bytes", "per_gpu_state", "place",
        "pp_bubble_fraction", "preset", "report", "state_bytes",
        "load_model", "estimate_many"}  # and ledger.api (docs/api.md)
    for name in ledger.__all__:
        assert getattr(ledger, name) is not None


def test_version_gpus_and_models_json(capsys):
    r = subprocess.run([sys.executable, "-m", "ledger", "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.strip() == "train-ledger 0.1.0"
    code, out, _ = run(capsys, "gpus", "--json")
    h100 = {g["name"]: g for g in json.loads(out)}["h100-sxm"]
    # NVIDIA H100 SXM datasheet: 989 / 1,979 TFLOP/s dense bf16 / fp8, 3.35 TB/s HBM3,
    # NVLink 900 GB/s both directions (450 one way); one 400 Gb/s NDR NIC per GPU = 50 GB/s
    assert (h100["bf16_tflops"], h100["fp8_tflops"], h100["hbm_TBps"], h100["nvlink_GBps"],
            h100["network_GBps"]) == (989, 1979, 3.35, 450, 50)
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "h100-sxm" in out and "scale-up" in out and "sources:" in out
    code, out, _ = run(capsys, "models", "--json")
    assert {m["name"]: m["params"] for m in json.loads(out)}["llama3-8b"] == 8_030_261_248


def test_estimate_names_its_schedule_and_carries_the_placement(capsys):
    argv = ["estimate", "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "2", "--dp", "8",
            "--global-batch", "256"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.splitlines()[0].endswith("on h100-sxm, schedule interleaved")
    code, out, _ = run(capsys, *argv, "--json")
    c = json.loads(out)["config"]
    assert (c["tp"], c["pp"], c["vp"], c["dp"], c["num_microbatches"]) == (8, 4, 2, 8, 32)


def test_every_flag_has_help():
    from ledger.cli import build_parser

    p = build_parser()
    subs = next(a for a in p._actions if a.dest == "cmd").choices
    missing = [f"{name} {a.option_strings or a.dest}" for name, sp in subs.items()
               for a in sp._actions if a.dest != "help" and not a.help]
    assert missing == []
