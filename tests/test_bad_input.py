"""Bad and edge input at the boundary: one line on stderr, exit 2, no traceback, no hang,
never NaN/Infinity in JSON - driven by hand-picked cases from issue 14 and by hypothesis.

The CLI runs in-process (``ledger.cli.main``) with stdout/stderr captured; every case is
bounded by SIGALRM, so a hang fails the test instead of stalling it.
"""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli import main

CASE_SECONDS = 30  # a bound on hangs, far above any case's run time; not a speed check


@contextlib.contextmanager
def time_limit(seconds: int):
    def stop(*_):
        raise TimeoutError(f"no answer within {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with time_limit(CASE_SECONDS), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def strict_json(text):
    """json.loads that refuses NaN and Infinity (which are not JSON)."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def assert_refused(argv, code, out, err):
    assert code == 2, (argv, code, out[:200], err)
    assert out == "", argv
    assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    assert "Traceback" not in err


# ---- the examples of issue 14, each with the line it now prints ----------------------

ISSUE = [
    (["report", "llama3-8b", "--tp", "0", "--gpus", "8"],
     "error: tp: must be an integer in 1..1,048,576, got '0'"),
    (["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--tf", "inf"],
     "error: tf: must be a finite number in [1e-06, 1e+06], got 'inf'"),
    (["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--p2p", "nan"],
     "error: p2p: must be a finite number in [0, 1e+06], got 'nan'"),
    (["report", "mixtral-8x7b", "--capacity-factor", "nan", "--ep", "2", "--dp", "2",
      "--json"], "error: capacity_factor: must be a finite number in (0, 64], got 'nan'"),
    (["report", "llama3-8b", "--microbatches", "0"],
     "error: microbatches: must be an integer in 1..1,073,741,824, got '0'"),
    (["schedule", "1f1b", "--pp", "100000", "--microbatches", "8"],
     "error: schedule: pp(100000) x vp(1) x microbatches(8) = 1,600,000 passes exceeds the "
     "20,000 this command draws"),
    (["layout", "--dp", "100000000"],
     "error: dp: must be an integer in 1..1,048,576, got '100000000'"),
    (["report", "llama3-8b", "--pp", "4", "--vp", "3", "--microbatches", "8"],
     "error: vp: megatron splits layers(32) evenly over pp(4) * vp(3) = 12 virtual stages"),
    (["report", "llama3-8b", "--tp", "8", "--dp", "1024", "--pp", "32", "--cp", "8"],
     "error: gpus: tp(8) * cp(8) * pp(32) * dp(1024) = 2,097,152 GPUs exceeds the limit of "
     "1,048,576"),
    (["plan", "llama3-8b", "--gpus", "8"], "error: global_batch: plan needs --global-batch"),
    (["report"], "error: model: give a model"),
    (["report", "llama3-8b", "--bogus"],
     "error: usage: train-ledger report does not take --bogus"),
    (["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--tB", "1"],
     "error: tB: 1f1b runs a full backward"),
    (["schedule", "zb-h1", "--pp", "4", "--microbatches", "8", "--tB", "3"],
     "error: tB: tB(3) must be below tb(2)"),
    # issue 22: the overlap switches and the pipeline's own splits
    (["estimate", "llama3-8b", "--gpus", "64", "--pipeline-model-parallel-layout", "Et|tL"],
     "error: pipeline_model_parallel_layout: a layer split needs pp > 1, got pp(1)"),
    (["estimate", "llama3-8b", "--gpus", "64", "--pp", "2",
      "--pipeline-model-parallel-layout", "Et*16|t*15L"],
     "error: pipeline_model_parallel_layout: 'Et*16|t*15L': 31 decoder layers t, the model "
     "has 32"),
    (["estimate", "llama3-8b", "--gpus", "64", "--pp", "2",
      "--decoder-first-pipeline-num-layers", "40"],
     "error: decoder_first_pipeline_num_layers: first(40) + last(0) of 32 layers leave -8"),
    (["plan", "llama3-8b", "--gpus", "64", "--global-batch", "64", "--framework",
      "torchtitan", "--no-overlap-grad-reduce"],
     "error: overlap_grad_reduce: torchtitan decides it at every ZeRO stage it offers"),
    (["plan", "llama3-8b", "--gpus", "64", "--global-batch", "64", "--ep-overlap"],
     "error: ep_overlap: llama3-8b has no experts to overlap"),
    (["schedule", "dualpipe", "--pp", "4", "--microbatches", "6"],
     "error: num_microbatches: dualpipe needs num_microbatches(6) >= 2 * pp(4) = 8"),
    (["report", "custom", "--layers", "2", "--hidden", "512", "--heads", "8", "--ffn", "1024",
      "--vocab", "1000", "--rope-mscale", "0"],
     "error: --rope-mscale: must be a number > 0 (1 = no YaRN factor), got 0.0"),
]


@pytest.mark.parametrize("argv,line", ISSUE)
def test_issue_examples_refused_in_one_line(argv, line):
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err.startswith(line), err


def test_closed_pipe_ends_quietly():
    r = subprocess.run(f"{sys.executable} -m ledger layout --dp 65536 --json | head -c 10",
                       shell=True, capture_output=True, text=True)
    assert r.stdout == "{\n \"world\"" and r.stderr == ""


# ---- hypothesis: generated bad input --------------------------------------------------

BASES = {
    "report": ["report", "llama3-8b"],
    "estimate": ["estimate", "llama3-8b"],
    "plan": ["plan", "llama3-8b", "--gpus", "8", "--global-batch", "8"],
    "layout": ["layout"],
    "schedule": ["schedule", "1f1b", "--pp", "4", "--microbatches", "8"],
    "models": ["models"],
    "gpus": ["gpus"],
    "seed": ["seed"],
}
SIZES = ["--tp", "--pp", "--dp", "--cp", "--ep", "--hsdp-shard", "--micro-batch",
         "--microbatches", "--global-batch", "--vp", "--gpus", "--gpus-per-node", "--layers",
         "--hidden", "--heads", "--kv-heads", "--ffn", "--vocab", "--top-k", "--seq"]
FLAGS = {  # flag -> kind of number it takes
    "report": {**{f: "count" for f in SIZES}, "--zero": "stage", "--num-experts": "natural",
               "--capacity-factor": "positive"},
    "plan": {**{f: "count" for f in ("--gpus", "--global-batch", "--top", "--tp", "--pp",
                                     "--cp", "--dp", "--ep", "--vp", "--micro-batch",
                                     "--max-tp", "--max-pp", "--gpus-per-node")},
             "--zero": "stage"},
    "layout": {f: "count" for f in ("--tp", "--cp", "--ep", "--dp", "--pp",
                                    "--gpus-per-node")},
    "schedule": {"--pp": "count", "--microbatches": "count", "--vp": "count", "--tf": "time",
                 "--tb": "time", "--tB": "time", "--tW": "time", "--p2p": "latency"},
}
RUN = {"--tokens": "tokens", "--pue": "pue", "--usd-per-gpu-hour": "price",
       "--ckpt-GBps": "storage", "--ckpt-GBps-per-node": "storage", "--ckpt-interval": "steps",
       "--gpu-mtbf-hours": "mtbf", "--relaunch-min": "relaunch"}  # a whole run (ledger.run)
FLAGS["estimate"] = FLAGS["report"] | RUN
FLAGS["plan"] = FLAGS["plan"] | RUN
CHOICES = {"--schedule": ("report", "estimate", "plan"), "--cp-kind": ("report", "estimate"),
           "--precision": ("report", "estimate"), "--framework": ("report", "estimate", "plan"),
           "--recompute": ("report", "estimate", "plan"), "--mlp": ("report", "estimate"),
           "--color": ("schedule",)}
TEXT = ["nan", "NaN", "inf", "-inf", "Infinity", "abc", "", "0x10", "1_0x", "--"]
NOT_INTEGERS = ["1.5", "1e3", "2.0"]


def bad_number(kind):
    """Strings each kind of flag must refuse."""
    common = st.sampled_from(TEXT) | st.integers(max_value=-1).map(str)
    if kind in ("count", "natural", "stage"):
        common = common | st.sampled_from(NOT_INTEGERS)
    if kind == "count":
        return common | st.just("0") | st.integers(min_value=2**40, max_value=10**30).map(str)
    if kind == "natural":
        return common | st.integers(min_value=2**40).map(str)
    if kind == "stage":
        return common | st.integers(min_value=4, max_value=10**6).map(str)
    if kind == "steps":
        return common | st.sampled_from(NOT_INTEGERS + ["0"]) \
            | st.integers(min_value=2**40 + 1, max_value=10**30).map(str)
    low = {"positive": 0.0, "time": 1e-6, "latency": 0.0, "tokens": 1.0, "pue": 1.0,
           "price": 0.0, "storage": 1e-3, "mtbf": 0.0, "relaunch": 0.0}[kind]
    high = {"positive": 64.0, "time": 1e6, "latency": 1e6, "tokens": 1e15, "pue": 10.0,
            "price": 1e4, "storage": 1e6, "mtbf": 1e9, "relaunch": 1e5}[kind]
    keep_low = kind in ("price", "mtbf")  # draw the low end itself (a latency of 0 is valid)
    tiny = st.floats(min_value=-1e6, max_value=low, exclude_max=not keep_low)
    over = st.floats(min_value=high, exclude_min=True, allow_infinity=False)
    return common | tiny.map(repr) | over.map(repr) | st.just("1e400")


@st.composite
def bad_argv(draw):
    cmd = draw(st.sampled_from(sorted(BASES)))
    argv = list(BASES[cmd])
    ways = ["unknown"] + ["number"] * (cmd in FLAGS) + \
        ["choice"] * any(cmd in cmds for cmds in CHOICES.values())
    how = draw(st.sampled_from(ways))
    if how == "number":
        flag, kind = draw(st.sampled_from(sorted(FLAGS[cmd].items())))
        value = draw(bad_number(kind))
        return argv + [f"{flag}={value}"]  # '=' so a value starting with '-' stays a value
    if how == "choice":
        flag = draw(st.sampled_from(sorted(f for f, cmds in CHOICES.items() if cmd in cmds)))
        return argv + [f"{flag}=zz{draw(st.text(max_size=8))}"]  # no choice starts zz
    name = draw(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12))
    return argv + [f"--zz{name}"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad_argv())
def test_generated_bad_flags_are_refused_in_one_line(argv):
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)


SIZE = st.sampled_from([1, 2, 3, 4, 8, 16, 64, 1000, 2**20])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cmd=st.sampled_from(["report", "estimate"]), tp=SIZE, pp=SIZE, dp=SIZE, cp=SIZE,
       m=st.sampled_from([1, 2, 7, 8, 64, 10**5, 10**9]),
       vp=st.sampled_from([None, 1, 2, 3, 4]),
       schedule=st.sampled_from([None, "gpipe", "1f1b", "interleaved", "zb-h1",
                                 "interleaved-zb", "zb-v"]))
def test_generated_sizes_give_finite_json_or_one_line(cmd, tp, pp, dp, cp, m, vp, schedule):
    argv = [cmd, "llama3-8b", "--tp", str(tp), "--pp", str(pp), "--dp", str(dp),
            "--cp", str(cp), "--microbatches", str(m), "--json"]
    argv += ["--vp", str(vp)] if vp else []
    argv += ["--schedule", schedule] if schedule else []
    code, out, err = run(argv)
    if code == 2:
        assert_refused(argv, code, out, err)
        return
    assert code == 0, (argv, err)
    assert err.count("\n") <= 1 and (err == "" or err.startswith("warning: "))
    d = strict_json(out)
    bubble = d["bubble_fraction"] if cmd == "report" else d["breakdown"].get("pp_bubble", 0)
    assert 0 <= bubble and (cmd == "estimate" or bubble < 1)


def test_ctrl_c_ends_quietly():
    import time

    p = subprocess.Popen([sys.executable, "-m", "ledger", "plan", "llama3-405b", "--gpus",
                          "1048576", "--global-batch", "68719476736", "--framework", "ideal"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tick, start = os.sysconf("SC_CLK_TCK"), time.monotonic()
    while time.monotonic() - start < CASE_SECONDS:  # past its imports (~0.3 s of CPU),
        with open(f"/proc/{p.pid}/stat") as f:  # inside the search (2 million placements)
            if int(f.read().rsplit(")", 1)[1].split()[11]) >= 1.5 * tick:
                break
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, "interrupted\n")


def test_absurd_model_from_any_source_is_refused(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers":
                             10**9, "num_attention_heads": 4, "intermediate_size": 128,
                             "vocab_size": 100}))
    code, out, err = run(["report", str(p)])
    assert_refused(["report"], code, out, err)
    assert err == "error: layers: layers(1,000,000,000) exceeds the limit of 65,536\n"


def test_a_head_width_that_does_not_exist_is_refused():
    """hidden 64 over 3 heads has no whole head width; with --head-dim it is a shape."""
    argv = ["report", "custom", "--layers", "2", "--hidden", "64", "--heads", "3", "--ffn",
            "128", "--vocab", "100"]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err == ("error: --head-dim: hidden(64) is not divisible by heads(3), so there is "
                   "no default head width; set it\n")
    code, out, err = run([*argv, "--head-dim", "16"])
    assert code == 0, err


def test_a_binary_config_json_is_refused(tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(bytes(range(128, 256)))
    code, out, err = run(["report", str(p)])
    assert code == 2 and err == f"error: model: {p} is not UTF-8 text (byte 0x80 at offset 0)\n"


@pytest.mark.parametrize("argv,line", [
    (["toys", "--bogus"], "error: usage: train-ledger toys: the following arguments are "
                          "required: toy"),
    (["verify", "--bogus"], "error: usage: train-ledger verify does not take --bogus; its "
                            "flags: --world --json --only"),
    (["toys", "zero", "--world", "x"], "error: world: invalid int value: 'x' (train-ledger "
                                       "toys --world)")])
def test_the_torch_commands_usage_errors_are_one_line(argv, line):
    """argparse's own usage + error (two lines and more) as every other error: one."""
    pytest.importorskip("torch")
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err == line + "\n"


@pytest.mark.parametrize("argv,field", [
    (["report", "llama3-8b", "--gpus", "8", "--framework", "torchtitan", "--zero", "3",
      "--offload-modules", "core_attn"], "offload_modules"),
    (["report", "llama3-8b", "--gpus", "8", "--zero", "0", "--optimizer-offload-fraction",
      "1.0"], "optimizer_offload_fraction"),
    (["report", "llama3-8b", "--gpus", "8", "--framework", "torchtitan", "--zero", "3",
      "--optimizer-offload-fraction", "0.5"], "optimizer_offload_fraction"),
])
def test_megatron_only_offloads_are_refused_elsewhere(argv, field):
    """Megatron's fine-grained activation offload and its optimizer CPU offload (the
    distributed optimizer's shard) are refused under another framework or ZeRO 0, in one
    line, instead of being priced there."""
    code, _, err = run(argv)
    assert code == 2 and err.startswith(f"error: {field}:") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv,field", [
    (["serve", "llama3-8b", "--enforce-eager", "--cudagraph-gib", "3"], "cudagraph_gib"),
    (["report", "llama3-8b", "--gpus", "8", "--zero", "1", "--optimizer", "sgd",
      "--optimizer-offload-fraction", "0.5"], "optimizer_offload_fraction"),
])
def test_flags_that_would_be_dropped_are_refused(argv, field):
    """A CUDA-graph figure beside --enforce-eager (which prices none), and the optimizer
    offload with a non-Adam optimizer (its host bytes are CPU Adam's), are refused in one
    line instead of one of them being silently dropped or mispriced."""
    code, _, err = run(argv)
    assert code == 2 and err.startswith(f"error: {field}:") and len(err.strip().splitlines()) == 1, err
