"""Every block of benchmark output the docs quote (tools/doc_quotes.py: a fence after a
paragraph that names ``python benchmarks/NAME.py`` and ends with a colon) is held to what
that script prints now - here, or by the test CHECKED names (which must exist) - or is
named in SLOW with the reason it is not re-run in the suite."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from doc_quotes import every_quote, slice_of  # noqa: E402

# (page, script) -> the test that holds that quote, where another file already does
CHECKED = {
    ("memory.md", "benchmarks/memory.py"): "tests/test_memory.py::test_docs_show_the_benchmarks_output",
    ("memory.md", "benchmarks/fit_memory.py"): "tests/test_memory.py::test_docs_show_the_benchmarks_output",
    ("memory.md", "benchmarks/mcore_table5_readings.py"):
        "tests/test_mcore_table5_readings.py::test_docs_quote_the_benchmarks_output",
    ("memory.md", "benchmarks/mcore_memory.py"):
        "tests/test_mcore_memory.py::test_docs_show_the_comparison",
    ("step-time.md", "benchmarks/bridge.py"):
        "tests/test_bridge_runner.py::test_docs_quote_what_bridge_prints",
    ("systems.md", "benchmarks/bridge.py"):
        "tests/test_bridge_runner.py::test_docs_quote_what_bridge_prints",
}
# scripts whose quotes are rewritten by tools/regen_docs.py but not re-run in the suite
SLOW = {
    "benchmarks/fit.py": "the calibration fit itself; tests/test_fit_rounds.py holds the "
                         "shipped constants to its fixed point",
    "benchmarks/memory_cpu.py": "real torch steps of twelve runs; tests/test_memory_measured.py "
                                "holds the points it marks held",
}
HERE = {"benchmarks/validation.py", "benchmarks/plan_agrees.py"}
QUOTES = every_quote()


def test_every_quote_is_held():
    assert len(QUOTES) >= 10
    loose = [(q.page, q.script) for q in QUOTES
             if (q.page, q.script) not in CHECKED and q.script not in set(SLOW) | HERE]
    assert loose == []


@pytest.mark.parametrize("where", sorted(set(CHECKED.values())))
def test_the_named_checks_exist(where):
    path, name = where.split("::")
    assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8")


def _printed(script: str) -> list[str]:
    if script == "benchmarks/plan_agrees.py":
        from ledger.render.plan_agrees import summary
        return list(summary())
    spec = importlib.util.spec_from_file_location("bench_validation", ROOT / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out: list[str] = []
    mod.table(out=out.append)
    out.append("")
    mod.tutorial(out=out.append)
    return out


@pytest.mark.parametrize("script", sorted(HERE))
def test_docs_quote_what_the_script_prints(script):
    quotes = [q for q in QUOTES if q.script == script]
    assert quotes, script
    printed = _printed(script)
    stale = [(q.page, q.start) for q in quotes if slice_of(printed, q.lines) is None]
    assert stale == [], f"run: python tools/regen_docs.py (stale quotes of {script})"


def test_the_quoted_fit_ships_the_shipped_constants():
    """benchmarks/fit.py is not re-run here (SLOW), but its quoted "ship" lines name the
    constants that ship (render.fit_rounds.shipped) and say the fixed point is them."""
    from ledger.render.fit_rounds import HOST_AXES, shipped

    (quote,) = [q for q in QUOTES if q.script == "benchmarks/fit.py"]
    ship = dict(line.split()[1:3] for line in quote.lines if line.startswith("ship "))
    want = {n: f"{v * 1e3:g}" if n in HOST_AXES else f"{v:g}"
            for n, v in shipped().named().items()}
    assert ship == want
    assert any("IS the shipped set" in line for line in quote.lines)
