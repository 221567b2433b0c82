"""Issue 35, the commands' own bounds: plan --min-gpus tries a bounded number of worlds (its
lower bound below every world that fits, its progress shown on a terminal), and the torch
commands handle Ctrl-C in one line before any heavy import."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError


# ---------------------------------------------------------------- --min-gpus bounded
@settings(max_examples=200, deadline=None)
@given(low=st.integers(1, 5000), node=st.sampled_from([1, 2, 4, 8, 72]),
       max_gpus=st.integers(1, 1 << 20))
def test_min_gpus_tries_a_bounded_number_of_worlds(low, node, max_gpus):
    import math

    from ledger.plan.fewest import GROWTH, NODE_STEPS, worlds

    w = worlds(low, node, max_gpus)
    bound = node + NODE_STEPS + math.log(max(max_gpus, 2), GROWTH) + math.log2(max_gpus) + 2
    assert len(w) <= bound
    assert w == sorted(set(w)) and all(1 <= n <= max_gpus for n in w)
    assert all(n % node == 0 for n in w if n > node)  # past one node, whole nodes
    first = -(-max(low, node + 1) // node) * node  # the first whole-node world past low
    steps = [first + k * node for k in range(NODE_STEPS) if first + k * node <= max_gpus]
    assert set(steps) <= set(w)  # NODE_STEPS nodes one at a time, none skipped
    assert [n for n in range(max(low, 1), node + 1) if n <= max_gpus] == \
        [n for n in w if n <= node]


def test_the_lower_bound_is_below_every_world_that_fits():
    """Held to the planner itself: on a 4 GiB GPU Llama 3 8B's weights alone (8.03e9 x 4
    bits = 3.74 GiB) need 1 GPU, its 405B sibling's 48; one fewer than the bound plans
    nothing that fits, and the answer min_gpus gives is the smallest of a plain scan."""
    from dataclasses import replace

    from ledger.model import llama3_8b, llama3_405b
    from ledger.plan import min_gpus, plan
    from ledger.plan.fewest import lower_bound
    from ledger.system import system

    sysm = system("h100-sxm")
    small = replace(sysm, gpu=replace(sysm.gpu, hbm_bytes=4 * 2**30))
    model = llama3_8b()
    assert lower_bound(model, small, 0.0, None) == 1
    assert lower_bound(llama3_405b(), small, 0.0, None) == 48  # 405.85e9 / 2 / 4 GiB = 47.3
    assert not _fits(plan, llama3_405b(), 47, small, 64)
    seen = []
    n, result = min_gpus(model, sysm, 64, 64, on_world=lambda *w: seen.append(w))
    assert result.plans and seen[-1][0] == n
    plain = next(k for k in range(1, 65) if _fits(plan, model, k, sysm, 64))
    assert n == plain


def _fits(plan, model, n, sysm, batch):
    try:
        return bool(plan(model, n, sysm, batch).plans)
    except LedgerError:
        return False


def test_min_gpus_shows_its_progress_on_a_terminal(monkeypatch):
    import contextlib
    import io

    from ledger.cli import main

    class Tty(io.StringIO):
        def isatty(self):
            return True
    out, err = io.StringIO(), Tty()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "llama3-8b", "--min-gpus", "--global-batch", "64", "--top", "1"])
    assert code == 0
    assert "\r  smallest world: planning 1 GPUs (world 1 of at most " in err.getvalue()
    assert err.getvalue().endswith("\n")


# ---------------------------------------------------------------- torch commands' first lines
@pytest.mark.parametrize("module", ["ledger/toys/__main__.py", "ledger/verify/__main__.py"])
def test_ctrl_c_is_handled_before_any_heavy_import(module):
    """``python -m`` / ``torchrun -m`` of a torch command: nothing but the standard library
    and ledger.toys.early is imported before the one-line SIGINT / SIGTERM handler."""
    import ast
    from pathlib import Path

    import ledger

    tree = ast.parse((Path(ledger.__file__).parent.parent / module).read_text())
    before = []
    for node in tree.body:
        if isinstance(node, ast.If) and "quit_on_signals" in ast.unparse(node):
            break
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            before += [node.module if isinstance(node, ast.ImportFrom) else a.name
                       for a in node.names][:1]
    else:
        pytest.fail("no quit_on_signals() at the top")
    assert set(before) <= {"__future__", "os", "sys", "ledger.toys.early"}, before


def test_the_early_handler_is_one_line_and_128_plus_the_signal():
    import subprocess
    import sys

    code = ("from ledger.toys.early import quit_on_signals; quit_on_signals(); import os, "
            "signal, time; os.kill(os.getpid(), signal.SIGINT); time.sleep(30)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=30)
    assert (r.returncode, r.stderr) == (130, "SIGINT received\n")
