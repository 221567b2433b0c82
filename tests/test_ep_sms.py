"""The flex dispatcher's SMs (ledger.step.ep_sms, ParallelConfig.ep_sms): what an overlapped
all-to-all takes from compute.

Golden figures, copied from their sources:
- DeepEP normal kernels: 20 SMs (deepseek-ai/DeepEP dd758caf deep_ep/buffers/legacy.py L31).
- HybridEP's defaults: ``(num_of_nodes == 1) ? 24 : 8`` for dispatch and combine
  (deepseek-ai/DeepEP 34152ae28f80 csrc/hybrid_ep/config.cuh L315-316, the commit
  Megatron-Bridge v0.5.0-v0.6.0 build, docker/Dockerfile.ci; hybrid-ep branch 94a9f8f6 L366-367),
  num_of_nodes = the group over its ranks per NVLink domain (hybrid_ep_buffer.py L83).
- Megatron-Bridge's perf launcher: moe_hybridep_num_sms = 32 for every HybridEP run
  (scripts/performance/utils/overrides.py L75 @v0.5.1, L89 @v0.6.0)."""
import json
from dataclasses import replace

import pytest

from ledger.config import ParallelConfig
from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
from ledger.render.bridge_launch import ep_sms_of
from ledger.step import estimate
from ledger.step.ep_sms import ep_sm_share, ep_sms
from ledger.system import system
from ledger.validation.bridge import rows
from test_bad_input import run


def cfg(ep, backend, **kw):
    return ParallelConfig(tp=1, pp=1, dp=ep, ep=ep, moe_dispatcher="flex", ep_backend=backend,
                          framework="megatron", **kw)


@pytest.mark.parametrize("gpu,ep,backend,sms", [
    ("b300", 8, "deepep", 20), ("b300", 16, "deepep", 20),
    ("b300", 8, "hybridep", 24), ("b300", 16, "hybridep", 8),  # one 8-GPU domain, two
    ("gb200", 64, "hybridep", 24), ("gb200", 72, "hybridep", 24),  # inside the NVL72 rack
    ("gb200", 144, "hybridep", 8)])
def test_defaults_by_backend_and_domain(gpu, ep, backend, sms):
    sysm = system(gpu)
    assert int(ep_sms(cfg(ep, backend), sysm)) == sms
    assert ep_sm_share(cfg(ep, backend), sysm) == pytest.approx(sms / sysm.gpu.sms)


def test_a_launchs_own_count_wins():
    assert ep_sms(cfg(16, "hybridep", ep_sms=32), system("b300")) == 32
    assert ep_sms(cfg(8, "deepep", ep_sms=24), system("b300")) == 24
    assert ep_sm_share(ParallelConfig(tp=1, pp=1, dp=8, ep=8, moe_dispatcher="alltoall",
                                      framework="megatron", ep_sms=32), system("b300")) == 0.0


def test_bridge_rows_take_the_launchers_32_under_hybridep():
    hybrid = [r for r in rows() if r.setting("moe_flex_dispatcher_backend") == "hybridep"]
    deep = [r for r in rows() if r.setting("moe_flex_dispatcher_backend") == "deepep"]
    assert len(hybrid) > 100 and deep
    assert {ep_sms_of(r) for r in hybrid} == {32}
    assert {ep_sms_of(r) for r in deep} <= {None, 20}


def test_more_sms_slow_the_overlapped_step():
    """26.06 GB200 GPT-OSS 120B (HybridEP, the combined 1F1B): its step at the launcher's 32
    SMs is slower than at DeepEP's 20, which the ledger took before."""
    row = next(r for r in rows() if r.id == "26.06/gb200/gpt-oss-120b/fp8_mx/64g/gbs1280/mbs4")
    model, prec = model_of(row), precision_of(row)[0]
    c = config_of(row, prec, model)[0]
    assert c.ep_sms == 32 and c.ep_overlap

    def step(sms):
        return estimate(model, replace(c, ep_sms=sms), system_of(row), precision=prec,
                        optimizer="adam", tp_overlap=tp_overlap(row)).step_time_s

    assert step(32) > step(20)


# -- a launch's --moe-flex-dispatcher-num-sms and the CLI's --ep-sms ----------------------
# Megatron-LM d98e8a64 transformer_config.py L964-975: moe_flex_dispatcher_num_sms (None),
# the deprecated moe_deepep_num_sms / moe_hybridep_num_sms (None); L1792-1811: a deprecated
# one is routed to the unified count whichever backend runs, the unified one wins, two
# different deprecated values are refused
LAUNCH = ("--num-layers 8 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 4096 "
          "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 "
          "--global-batch-size 256 --tensor-model-parallel-size 2 "
          "--pipeline-model-parallel-size 2 --vocab-size 32000 --bf16 "
          "--tokenizer-type NullTokenizer --num-experts 8 --moe-router-topk 2 "
          "--expert-model-parallel-size 2 --expert-tensor-parallel-size 1 --sequence-parallel "
          "--num-layers-per-virtual-pipeline-stage 2")
FLEX = " --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep " \
    "--overlap-moe-expert-parallel-comm"


def launch(tmp_path, flags, *extra, cmd="estimate", verbose=("--verbose",)):
    path = tmp_path / f"launch{len(list(tmp_path.iterdir()))}.sh"
    path.write_text(LAUNCH + flags + "\n")
    code, out, err = run([cmd, "--from-megatron", str(path), "--gpus", "16", "--json",
                          *verbose, *extra])
    return code, (json.loads(out) if code == 0 else out), err


def line(err, start):
    return next((x for x in err.splitlines() if x.startswith(start)), "")


@pytest.mark.parametrize("given,sms,unread", [
    ("--moe-flex-dispatcher-num-sms 32", 32, None),
    ("--moe-hybridep-num-sms 16", 16, None),
    ("--moe-deepep-num-sms 24", 24, None),  # routed to HybridEP too (L1805-1811)
    ("--moe-flex-dispatcher-num-sms 32 --moe-deepep-num-sms 24", 32, "--moe-deepep-num-sms 24"),
    ("--moe-deepep-num-sms 24 --moe-hybridep-num-sms 24", 24, None)])
def test_a_launchs_sm_count_is_applied_as_megatron_resolves_it(tmp_path, given, sms, unread):
    code, est, err = launch(tmp_path, f"{FLEX} {given}")
    assert code == 0, err
    assert est["config"]["ep_sms"] == sms and "not modelled" not in err, err
    applied, silent = line(err, "note: applied:"), line(err, "note: accepted")
    read = given.replace(unread or "\0", "").strip()
    assert applied.endswith(read) and (unread is None or unread in silent), err


@pytest.mark.parametrize("flags", [
    " --moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm",
    ""])  # the default dispatcher: alltoall
def test_an_sm_count_no_dispatcher_reads_is_silent(tmp_path, flags):
    code, base, err = launch(tmp_path, flags)
    assert code == 0, err
    for knob in ("--moe-flex-dispatcher-num-sms 32", "--moe-deepep-num-sms 32",
                 "--moe-hybridep-num-sms 32"):
        code, est, err = launch(tmp_path, f"{flags} {knob}")
        assert code == 0 and "not modelled" not in err, err
        assert knob in line(err, "note: accepted") and knob not in line(err, "note: applied")
        assert est["config"]["ep_sms"] is None
        assert (est["step_time_s"], est["memory"]) == (base["step_time_s"], base["memory"])


def test_conflicting_deprecated_sm_counts_are_refused(tmp_path):
    code, out, err = launch(tmp_path, FLEX + " --moe-deepep-num-sms 24 --moe-hybridep-num-sms 32")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--moe-deepep-num-sms 24 and --moe-hybridep-num-sms 32 conflict" in err


def test_deepeps_buffers_take_the_launchs_sms(tmp_path):
    """DeepEP sizes its NVLink buffer per channel (SMs / 2: placement.ep_buffers)."""
    deep = FLEX.replace("hybridep", "deepep")
    _, base, _ = launch(tmp_path, deep)
    _, more, _ = launch(tmp_path, deep + " --moe-flex-dispatcher-num-sms 32")
    nvl = "DeepEP NVLink buffer"
    assert more["memory"]["context_named"][nvl] > base["memory"]["context_named"][nvl]
    assert more["memory"]["required"] > base["memory"]["required"]


@pytest.mark.parametrize("argv,msg", [
    (["--ep-sms", "0"], "error: ep_sms: must be an integer in 1..1,024, got '0'"),
    (["--ep-sms", "-4"], "error: ep_sms: must be an integer in 1..1,024, got '-4'"),
    (["--ep-sms", "133"], "error: ep_sms: 133 SMs for the flex dispatcher: must be 1 to the "
                          "h100-sxm's 132"),
    (["--ep-sms", "149", "--gpu", "b200"], "error: ep_sms: 149 SMs for the flex dispatcher: "
                                           "must be 1 to the b200's 148")])
@pytest.mark.parametrize("cmd", ["estimate", "plan"])
def test_ep_sms_out_of_range_is_one_line(cmd, argv, msg):
    code, out, err = run([cmd, "mixtral-8x7b", "--gpus", "16", "--global-batch", "64", *argv])
    assert code == 2 and out == "" and err.startswith(msg) and len(err.splitlines()) == 1, err


MIXTRAL = ["mixtral-8x7b", "--gpus", "64", "--tp", "1", "--pp", "4", "--vp", "2", "--ep", "8",
           "--micro-batch", "1", "--global-batch", "256", "--ep-overlap", "--ep-sms", "64"]


@pytest.mark.parametrize("argv,msg", [
    ([], "error: ep_sms: --ep-sms 64 needs --moe-token-dispatcher-type flex (DeepEP / "
         "HybridEP); the alltoall dispatcher takes no SMs of its own"),  # megatron's default
    (["--moe-token-dispatcher-type", "alltoall"], "error: ep_sms: --ep-sms 64 needs "
                                                  "--moe-token-dispatcher-type flex")])
def test_ep_sms_without_the_flex_dispatcher_is_refused(argv, msg):
    """ledger.step.ep_sms takes no SMs outside flex: the count changed no figure."""
    code, out, err = run(["estimate", *MIXTRAL, *argv])
    assert code == 2 and out == "" and err.startswith(msg) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv", [[], ["--moe-token-dispatcher-type", "alltoall"]])
def test_a_flex_backend_without_the_flex_dispatcher_is_refused(argv):
    """The backend picks the flex dispatcher's kernels: under alltoall it changed no figure."""
    code, out, err = run(["estimate", *MIXTRAL[:-2], "--moe-flex-dispatcher-backend",
                          "hybridep", *argv])
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith(
        "error: ep_backend: --moe-flex-dispatcher-backend hybridep needs "
        "--moe-token-dispatcher-type flex; the alltoall dispatcher runs no"), err
    code, _, err = run(["estimate", *MIXTRAL[:-2], "--moe-flex-dispatcher-backend", "hybridep",
                        "--moe-token-dispatcher-type", "flex"])
    assert code == 0, err


def test_an_odd_count_under_deepep_is_refused(tmp_path):
    """DeepEP asserts an even SM count (deepseek-ai/DeepEP 030cdf0a deep_ep/buffer.py L150);
    HybridEP takes 21."""
    deep = FLEX.replace("hybridep", "deepep")
    code, _, err = launch(tmp_path, deep + " --moe-flex-dispatcher-num-sms 21", verbose=())
    assert code == 2 and err == "error: ep_sms: 21 SMs for DeepEP: its Buffer.set_num_sms " \
                                "takes an even count (one channel per 2 SMs)\n", err
    code, est, err = launch(tmp_path, FLEX + " --moe-flex-dispatcher-num-sms 21")
    assert code == 0 and est["config"]["ep_sms"] == 21, err
    code, _, err = run(["estimate", "mixtral-8x7b", "--gpus", "64", "--ep", "8", "--etp", "1",
                        "--moe-token-dispatcher-type", "flex", "--ep-sms", "21"])
    assert code == 2 and err.startswith("error: ep_sms: 21 SMs for DeepEP"), err


def test_a_launchs_sm_count_beyond_its_gpu_is_refused(tmp_path):
    code, _, err = launch(tmp_path, FLEX + " --moe-flex-dispatcher-num-sms 200", verbose=())
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ep_sms: 200 SMs for the flex dispatcher: "
                                        "must be 1 to the h100-sxm's 132"), err


def test_the_typed_flag_moves_the_overlapped_step():
    code, out, err = run(["estimate", "mixtral-8x7b", "--gpus", "64", "--tp", "1", "--pp",
                          "4", "--vp", "2", "--ep", "8", "--etp", "1", "--micro-batch", "1",
                          "--global-batch", "256", "--moe-token-dispatcher-type", "flex",
                          "--ep-overlap", "--json"])
    assert code == 0, err
    code, more, err = run(["estimate", "mixtral-8x7b", "--gpus", "64", "--tp", "1", "--pp",
                           "4", "--vp", "2", "--ep", "8", "--etp", "1", "--micro-batch", "1",
                           "--global-batch", "256", "--moe-token-dispatcher-type", "flex",
                           "--ep-overlap", "--ep-sms", "64", "--json"])
    assert code == 0, err
    assert json.loads(more)["step_time_s"] > json.loads(out)["step_time_s"]


PINS = ["--tp", "2", "--pp", "2", "--cp", "1", "--ep", "2", "--vp", "2", "--zero", "0",
        "--micro-batch", "4", "--recompute", "none", "--schedule", "interleaved",
        "--ep-overlap", "--no-overlap-grad-reduce"]


def same_placement(row) -> list[str]:
    """estimate's flags for a plan row's TP comm-GEMM overlap (the one switch PINS leave to
    the search: the launch sets no --tp-comm-overlap)."""
    return ["--tp-overlap"] if row["tp_overlap"] else []


def by_overlap(planned) -> dict:
    return {r["tp_overlap"]: r for r in planned["plans"]}


def test_plan_prices_a_launchs_sm_count(tmp_path):
    """The planner holds a flex launch's backend and SM count (inputs.PLAN_FROM_FILE) and
    prices them: nothing named as not modelled, every row carries the file's, and the 32
    SMs HybridEP takes from compute slow the overlapped step against its default 24 (one
    node: config.cuh L315-316) as they slow estimate's."""
    code, planned, err = launch(tmp_path, FLEX + " --moe-hybridep-num-sms 32", *PINS, cmd="plan")
    assert code == 0 and "not modelled" not in err and "approximate" not in planned, err
    assert {(r["moe_dispatcher"], r["etp"], r["ep_backend"], r["ep_sms"])
            for r in planned["plans"]} == {("flex", 1, "hybridep", 32)}
    code, base, err = launch(tmp_path, FLEX, *PINS, cmd="plan")
    assert code == 0 and {r["ep_sms"] for r in base["plans"]} == {None}, err
    more, less = by_overlap(planned), by_overlap(base)
    assert more.keys() == less.keys() == {True, False}
    for ov in (True, False):
        assert more[ov]["step_time_s"] > less[ov]["step_time_s"]
        assert more[ov]["memory_bytes"] == less[ov]["memory_bytes"]  # HybridEP's buffers
        # are sized by tokens, not SMs (placement.ep_buffers)


@pytest.mark.parametrize("argv,msg", [
    (["--moe-flex-dispatcher-backend", "hybridep"],
     "error: ep_backend: --moe-flex-dispatcher-backend hybridep needs "
     "--moe-token-dispatcher-type flex; the alltoall dispatcher runs no DeepEP / HybridEP "
     "kernels"),
    (["--ep-sms", "64"], "error: ep_sms: --ep-sms 64 needs --moe-token-dispatcher-type flex "
                         "(DeepEP / HybridEP); the alltoall dispatcher takes no SMs of its own"),
    (["--moe-token-dispatcher-type", "flex", "--etp", "2"],
     "error: etp: the flex (DeepEP) dispatcher is modelled at etp 1 only, got etp(2)"),
    (["--moe-token-dispatcher-type", "flex", "--ep-sms", "21"],
     "error: ep_sms: 21 SMs for DeepEP: its Buffer.set_num_sms takes an even count (one "
     "channel per 2 SMs)"),
    (["--etp", "3"], "error: moe_ffn_hidden: moe_ffn_hidden(14336) is not divisible by etp(3)"),
    (["--moe-token-dispatcher-type", "flex", "--tp", "2"],
     "error: gpus: no placement of mixtral-8x7b divides gpus(64) and global_batch(256) under "
     "the pins given, the flex dispatcher (at expert TP 1) held and megatron's pipelines")])
def test_plan_refuses_the_flex_dispatchers_flags_as_estimate_does(argv, msg):
    """The flex dispatcher's backend and SMs need it, as estimate says; the expert TP it is
    modelled at and the experts' width are held to every candidate (one line each)."""
    untyped = [x for i, x in enumerate(MIXTRAL[:-2]) if "--tp" not in MIXTRAL[i - 1:i + 1]]
    code, out, err = run(["plan", *untyped, *argv])
    assert code == 2 and out == "" and err.startswith(msg) and len(err.splitlines()) == 1, err


def test_plan_holds_the_flex_dispatchers_typed_flags():
    """Typed, the dispatcher, expert TP, backend and SMs are held in every row, and each
    row is what estimate prices at its placement."""
    held = ["--moe-token-dispatcher-type", "flex", "--etp", "1", "--moe-flex-dispatcher-backend",
            "hybridep", "--ep-sms", "64"]
    code, out, err = run(["plan", *MIXTRAL[:-2], *held, "--top", "2", "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert {(r["moe_dispatcher"], r["etp"], r["ep_backend"], r["ep_sms"]) for r in rows} == \
        {("flex", 1, "hybridep", 64)}
    for r in rows:
        code, est, err = run(["estimate", "mixtral-8x7b", "--gpus", "64", *held, "--json",
                              "--global-batch", "256", *placement_flags(r)])
        assert code == 0, err
        assert json.loads(est)["step_time_s"] == pytest.approx(r["step_time_s"], rel=1e-9)
        assert json.loads(est)["memory"]["required"] == pytest.approx(r["memory_bytes"],
                                                                      rel=1e-9)


def placement_flags(r) -> list[str]:
    """estimate's flags for every searched field of a plan row."""
    out = ["--tp", str(r["tp"]), "--pp", str(r["pp"]), "--cp", str(r["cp"]), "--ep",
           str(r["ep"]), "--vp", str(r["vp"]), "--zero", str(r["zero_stage"]),
           "--micro-batch", str(r["micro_batch"]), "--recompute", r["recompute"],
           "--schedule", r["schedule"], "--cp-kind", r["cp_kind"]]
    out += [] if r["sequence_parallel"] else ["--no-sp"]
    out += ["--tp-overlap"] if r["tp_overlap"] else []
    out += ["--ep-overlap" if r["ep_overlap"] else "--no-ep-overlap"]
    for flag in ("overlap_grad_reduce", "overlap_param_gather"):
        out += [f"--{'' if r[flag] else 'no-'}{flag.replace('_', '-')}"]
    return out


def test_plan_prices_a_flex_launch_as_estimate_does(tmp_path):
    """Issue 32's xfail (plan 0.967 s / 16.20e9 B against estimate 0.944 s / 20.57e9 B
    before the planner held the launch's dispatcher and etp 1): each row, at its TP
    overlap, is what estimate prices."""
    _, planned, _ = launch(tmp_path, FLEX + " --moe-hybridep-num-sms 32", *PINS, cmd="plan")
    row = planned["plans"][0]
    assert (row["moe_dispatcher"], row["etp"]) == ("flex", 1)
    _, est, _ = launch(tmp_path, FLEX + " --moe-hybridep-num-sms 32", *same_placement(row))
    assert row["step_time_s"] == pytest.approx(est["step_time_s"], rel=1e-9)
    assert row["memory_bytes"] == pytest.approx(est["memory"]["required"], rel=1e-9)


@pytest.mark.parametrize("backend,gpu", [("hybridep", "h100-sxm"), ("deepep", "h100-sxm"),
                                         ("hybridep", "gb200")])
def test_plan_estimate_and_report_agree_on_a_flex_etp1_launch(tmp_path, backend, gpu):
    """Issue 31 must-hold 3 / issue 32 must-hold 1 on a flex + --expert-tensor-parallel-size
    1 launch: at every ranked placement, plan's step time is estimate's and its memory is
    report's (the bytes its fit verdict reads), to 1e-9."""
    flags = FLEX.replace("hybridep", backend) + " --moe-flex-dispatcher-num-sms 24"
    gpu_flags = ["--gpu", gpu]
    code, planned, err = launch(tmp_path, flags, *PINS, *gpu_flags, cmd="plan")
    assert code == 0 and planned["plans"], err
    code, rep, err = launch(tmp_path, flags, *gpu_flags, cmd="report")
    assert code == 0, err
    assert len(planned["plans"]) == 2  # PINS leave the TP comm-GEMM overlap: on and off
    for row in planned["plans"]:
        assert (row["moe_dispatcher"], row["etp"], row["ep_backend"], row["ep_sms"]) == \
            ("flex", 1, backend, 24)
        code, est, err = launch(tmp_path, flags, *gpu_flags, *same_placement(row))
        assert code == 0, err
        assert row["step_time_s"] == pytest.approx(est["step_time_s"], rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(rep["memory"]["required"], rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(est["memory"]["required"], rel=1e-9)


def test_a_launch_without_its_own_etp_plans_etp_as_tp(tmp_path):
    """A file that leaves --expert-tensor-parallel-size unset runs etp = tp (arguments.py
    L587-588 @d98e8a64): plan holds no etp, each candidate's follows its tp; the file's
    dispatcher (Megatron's default, allgather, as estimate reads it) is held. A typed
    --etp is held beside it."""
    path = tmp_path / "noetp.sh"
    path.write_text(LAUNCH.replace(" --expert-tensor-parallel-size 1", "") + "\n")
    few = ["--from-megatron", str(path), "--gpus", "16", "--zero", "1", "--recompute", "none",
           "--micro-batch", "4", "--no-cp", "--max-pp", "2", "--top", "40"]
    code, out, err = run(["plan", *few, "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert {r["tp"] for r in rows} >= {1, 2}
    assert all(r["etp"] == r["tp"] and r["moe_dispatcher"] == "allgather" for r in rows)
    code, text, err = run(["plan", *few, "--top", "1"])
    assert code == 0 and "held in every placement: dispatcher=allgather\n" in text, err
    code, out, err = run(["plan", *few, "--etp", "1", "--json"])
    assert code == 0, err
    rows = json.loads(out)["plans"]
    assert {r["tp"] for r in rows} >= {1, 2} and {r["etp"] for r in rows} == {1}
