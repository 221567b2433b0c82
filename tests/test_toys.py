"""The toys on real gloo processes: their checks, their numbers, and failure handling.

Each test launches a real world (python -m ledger.toys), so the launcher itself,
the fork, the store and the cleanup are exercised exactly as a user meets them.
"""
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from procs import leftovers

pytest.importorskip("torch")


def toys(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "ledger.toys", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def reports():
    r = toys("all", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"]
    return {rep["name"]: rep for rep in out["reports"]}


def test_every_toy_ran_and_every_check_passed(reports):
    assert list(reports) == ["zero", "tp", "cp", "pp", "ep"]
    for rep in reports.values():
        assert rep["checks"], rep["name"]
        assert all(c["ok"] for c in rep["checks"]), rep["name"]


def test_zero_numbers(reports):
    v = reports["zero"]["values"]
    assert v["all_reduce"] == [60.0, 64.0, 68.0, 72.0, 76.0, 80.0, 84.0, 88.0]
    assert v["rank0_shard"] == [60.0, 64.0]
    assert v["all_gather_half"] == [30.0, 32.0, 34.0, 36.0, 38.0, 40.0, 42.0, 44.0]
    rows = {b["collective"]: b for b in reports["zero"]["bytes"]}
    assert rows["all_reduce"]["measured"] == rows["all_reduce"]["predicted"] == [48.0] * 4
    assert rows["reduce_scatter"]["measured"] == [24.0] * 4
    # on the wire, from the kernel, at 128 KiB (131072 B) over 4 ranks, by hand:
    # ring all-reduce 2 x 3/4 x 131072; all-gather 3/4 x 131072; gloo's reduce-scatter is
    # an all-reduce of the whole input, so it carries the all-reduce's bytes
    assert rows["all_reduce at 128 KiB"]["wire"] == [196608.0] * 4
    assert rows["all_gather at 128 KiB"]["wire"] == [98304.0] * 4
    assert rows["reduce_scatter at 128 KiB"]["wire"] == [196608.0] * 4
    assert rows["reduce_scatter at 128 KiB"]["predicted"] == [98304.0] * 4  # the ledger's


def test_tp_numbers(reports):
    v = reports["tp"]["values"]
    assert v["y"] == [[[7.0]], [[10.0]]] * 2  # Y_0 = relu(X A_0), Y_1 = relu(X A_1); 2 pairs
    assert v["z"] == [[7.0, 20.0]] and v["dx"] == [[5.0, 11.0]]
    b = reports["tp"]["bytes"][0]
    assert b["measured"] == b["predicted"] == [16.0] * 4  # two TP pairs in a world of 4
    # 16384 tokens x 2 x 4 B = 131072 B per all-reduce, two per block; a pair's ring sends
    # 2 x 1/2 of it: 262144 B per rank, counted by the kernel
    assert reports["tp"]["bytes"][1]["wire"] == [262144.0] * 4


def test_cp_numbers(reports):
    v = reports["cp"]["values"]
    assert v["orders"] == [[0, 3, 2, 1], [1, 0, 3, 2], [2, 1, 0, 3], [3, 2, 1, 0]]
    assert v["work"] == [9, 9, 9, 9]
    assert v["worked_output"] == [1.0, 0.693] and v["worked_l"] == 1.639
    for b in reports["cp"]["bytes"]:
        assert b["measured"] == b["predicted"], b["collective"]
    wire = {b["collective"].split(",")[0]: b["wire"] for b in reports["cp"]["bytes"]
            if b["wire"]}
    # K/V block: 2 x 8 heads x 128 tokens x 32 x 4 B = 262144 B, 3 ring steps
    assert wire["send_recv (ring"] == wire["send_recv (causal"] == [786432.0] * 4
    # Ulysses: 4 all-to-alls of 8 x 128 x 32 x 4 B = 131072 B, 3/4 leaves the rank
    assert wire["all_to_all (ulysses"] == [393216.0] * 4


def test_pp_numbers(reports):
    v = reports["pp"]["values"]
    assert v["gpipe"]["peak"] == [4, 4, 4, 4] and v["1f1b"]["peak"] == [4, 3, 2, 1]
    assert max(v["gpipe"]["errors"] + v["1f1b"]["errors"]) <= 1e-6
    # 2048 rows x 4 x 4 B = 32768 B per boundary tensor, 4 micro-batches: interior stages
    # send 4 activations + 4 gradients, the end stages 4 of one kind
    for b in reports["pp"]["bytes"][2:]:
        assert b["wire"] == [131072.0, 262144.0, 262144.0, 131072.0], b["collective"]


def _capacity_drops(experts_by_rank, capacity):
    """Written for this test: every routed copy in arrival order (rank, token, choice);
    an expert takes its first ``capacity`` copies."""
    taken, kept = {}, []
    for ids in experts_by_rank:
        row = []
        for e in ids:
            taken[e] = taken.get(e, 0) + 1
            row.append(taken[e] <= capacity)
        kept.append(row)
    return kept


def test_ep_capacity_drops_match_an_independent_loop(reports):
    v = reports["ep"]["values"]
    assert v["capacity"] == 20  # ceil(1.25 x 64 tokens x top-2 / 8 experts) = ceil(20.0)
    assert [len(ids) for ids in v["experts"]] == [32] * 4  # 16 tokens x top-2 per rank
    kept = _capacity_drops(v["experts"], 20)
    assert v["kept"] == kept
    assert sum(not k for row in kept for k in row) > 0  # the seed does overflow experts


@pytest.mark.parametrize("fault,needle", [("raise:2", "rank 2: RuntimeError: injected fault"),
                                          ("die:1", "rank 1: died (killed by signal 9)")])
def test_a_failing_rank_ends_the_run_and_is_named(fault, needle):
    tag = f"LEDGER_TEST_{uuid.uuid4().hex}"
    env = dict(os.environ, **{tag: "1"})
    start = time.monotonic()
    r = toys("all", "--inject-fault", fault, env=env, timeout=60)
    elapsed = time.monotonic() - start
    assert r.returncode == 1
    assert needle in r.stderr.splitlines()[-1]  # the launcher's own last word names it
    assert elapsed < 30
    assert leftovers(tag) == []


def test_two_runs_at_once_do_not_collide():
    a = subprocess.Popen([sys.executable, "-m", "ledger.toys", "zero"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen([sys.executable, "-m", "ledger.toys", "tp"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for p in (a, b):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "0 failed" in out


def test_train_ledger_toys_and_bad_world(capsys):
    from ledger.cli import main
    assert main(["toys", "zero", "--world", "3"]) == 2
    assert main(["toys", "tp", "--world", "16"]) == 2  # refused, not "passed" on 2 ranks
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: world: toys zero runs on 2, 4 or 8 ranks, got 3",
                   "error: world: toys tp runs on 2, 4 or 8 ranks, got 16"]


def _torchrun(nproc, *args):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", str(nproc), "-m", "ledger.toys", *args],
                          capture_output=True, text=True, timeout=120)


def test_same_code_under_torchrun():
    """torchrun is the engine across nodes; here one node, four ranks, rank 0 prints."""
    r = _torchrun(4, "zero", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and [rep["name"] for rep in out["reports"]] == ["zero"]


def test_torchrun_with_a_world_the_toy_cannot_use():
    """Checked before any rank joins: one line from rank 0 (torchrun then reports the
    exit status its own way), no gloo error."""
    r = _torchrun(3, "zero")
    assert r.returncode != 0
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert ours == ["error: world: toys zero runs on 2, 4 or 8 ranks, got 3"]
    assert "gloo" not in r.stderr.lower()


# ---------------------------------------------------------------- timed on progress
# (issue 35) A world is timed on progress, not wall time: the limit is shortened to
# HANG seconds by the launcher's test hook, so that each case costs one short world.
HANG = "1.5"


def test_a_rank_that_makes_no_progress_is_a_named_hang():
    tag = f"LEDGER_TEST_{uuid.uuid4().hex}"
    r = toys("spawn", "--hang-limit-s", HANG, "--inject-fault", "stop:2",
             env=dict(os.environ, **{tag: "1"}), timeout=90)
    assert r.returncode == 1 and r.stderr.splitlines() == [
        "error: rank 2: no progress for 1.5 s (stopped), a hang; 3 other rank(s) waited on "
        "it"], r.stderr
    assert leftovers(tag) == []  # the stopped rank too


def test_a_slow_world_under_a_stopped_parent_finishes():
    """One world, two faults: rank 1 is busy for twice the limit before its collective
    (the others wait on it: a slow world, not a hang), and the launcher itself is stopped
    (SIGSTOP, as by Ctrl-Z) for twice the limit once its ranks run, then continued: the
    time it was stopped is nobody's hang."""
    import signal

    p = subprocess.Popen([sys.executable, "-m", "ledger.toys", "spawn", "--hang-limit-s", HANG,
                          "--inject-fault", "slow:1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    children = f"/proc/{p.pid}/task/{p.pid}/children"
    while time.monotonic() < deadline and not _read(children).strip():
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(2 * float(HANG))
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and err == "", err


def _read(path):
    with open(path) as f:
        return f.read()


def test_kill_9_of_torchrun_orphans_no_stopped_rank():
    """Rank 2 stops itself (SIGSTOP) under torchrun; torchrun is killed with SIGKILL: the
    kernel ends every rank (PR_SET_PDEATHSIG), the stopped one too."""
    import signal

    tag = f"LEDGER_TEST_{uuid.uuid4().hex}"
    p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node", "4", "-m", "ledger.toys", "spawn",
                          "--inject-fault", "stop:2", "--hang-limit-s", "100"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, **{tag: "1"}))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(_state(pid) == "T" for pid in leftovers(tag)):
        time.sleep(0.2)
    assert any(_state(pid) == "T" for pid in leftovers(tag))
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.monotonic() + 10
    while leftovers(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(tag) == []


def _state(pid):
    try:
        return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"
