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


def test_tp_numbers(reports):
    v = reports["tp"]["values"]
    assert v["y"] == [[[7.0]], [[10.0]]]
    assert v["z"] == [[7.0, 20.0]] and v["dx"] == [[5.0, 11.0]]
    b = reports["tp"]["bytes"][0]
    assert b["measured"] == b["predicted"] == [16.0, 16.0]


def test_cp_numbers(reports):
    v = reports["cp"]["values"]
    assert v["orders"] == [[0, 3, 2, 1], [1, 0, 3, 2], [2, 1, 0, 3], [3, 2, 1, 0]]
    assert v["work"] == [9, 9, 9, 9]
    assert v["worked_output"] == [1.0, 0.693] and v["worked_l"] == 1.639
    for b in reports["cp"]["bytes"]:
        assert b["measured"] == b["predicted"], b["collective"]


def test_pp_numbers(reports):
    v = reports["pp"]["values"]
    assert v["gpipe"]["peak"] == [4, 4, 4, 4] and v["1f1b"]["peak"] == [4, 3, 2, 1]
    assert max(v["gpipe"]["errors"] + v["1f1b"]["errors"]) <= 1e-6


def test_ep_numbers(reports):
    v = reports["ep"]["values"]
    assert v["capacity"] == 20
    assert all(sum(row) == 32 for row in v["matrix"])
    assert v["received"] == [sum(row[j] for row in v["matrix"]) for j in range(4)]
    assert v["rho"] == max(v["received"]) / 32
    assert sum(v["per_expert"]) == 128
    assert v["over"] == [k for k, c in enumerate(v["per_expert"]) if c > 20]


def _leftovers(tag: str) -> list[int]:
    """Processes whose environment carries ``tag`` (children inherit it)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if tag.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


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
    assert _leftovers(tag) == []


def test_two_runs_at_once_do_not_collide():
    a = subprocess.Popen([sys.executable, "-m", "ledger.toys", "zero"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen([sys.executable, "-m", "ledger.toys", "tp"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for p in (a, b):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "0 failed" in out


def test_train_ledger_toys_and_bad_world():
    from ledger.cli import main
    assert main(["toys", "zero", "--world", "3"]) == 2


def test_same_code_under_torchrun():
    """torchrun is the engine across nodes; here one node, four ranks, rank 0 prints."""
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node", "4", "-m", "ledger.toys", "zero", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and [rep["name"] for rep in out["reports"]] == ["zero"]
