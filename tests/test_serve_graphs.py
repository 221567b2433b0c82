"""vLLM's CUDA-graph memory estimate (issue 33): the graphs vLLM's defaults capture, the two
constants fitted on logged estimates (tests/fixtures/serve/cudagraph_logs.json, sources in
SOURCES.md) and held to every logged row, and the estimate subtracted by default."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.model import llama3_70b
from ledger.serve import ServeConfig, serve
from ledger.serve.graphs import (FIRST_CAPTURE_BYTES, PER_GRAPH_BYTES, SPREAD, capture_sizes,
                                 estimate_bytes, fit, graphs, spread)
from ledger.system import system

ROOT = Path(__file__).parents[1]
LOGS = json.loads((ROOT / "tests" / "fixtures" / "serve" / "cudagraph_logs.json").read_text())
ROWS = LOGS["rows"]
GiB = 2**30
H100 = system("h100-sxm")


def point(r):
    return r["piecewise"], r["full"], r["estimate_gib"]


def test_capture_sizes_as_vllm_logs_them():
    """vLLM's default sizes: 51 up to 512 (1, 2, 4, every 8 to 248, every 16 from 256); the
    FULL decode graphs stop at max_num_seqs: 'PIECEWISE=51 (largest=512), FULL=35
    (largest=256)' at 256 sequences, 'FULL=51 (largest=512)' from 512, as every default
    row of the fixture logs."""
    assert len(capture_sizes(512)) == 51 and capture_sizes(512)[:5] == [1, 2, 4, 8, 16]
    counts = {(g.piecewise, g.full, g.largest) for g in (graphs(llama3_70b(), n, 8192)
                                                         for n in (256, 1024))}
    assert counts == {(51, 35, 512), (51, 51, 512)}
    defaults = [r for r in ROWS if r["piecewise_largest"] == 512 and r["role"] == "fit"]
    assert defaults and all((r["piecewise"], r["full"], 512) in counts for r in defaults)


def test_gpt_oss_captures_up_to_1024():
    """gpt-oss raises the cap to 1,024 (83 sizes); on an H100 vllm serve's max_num_seqs is
    1,024, so every size also has a FULL decode graph; max_num_batched_tokens caps both."""
    model, _ = read_hf_config(ROOT / "examples" / "gpt-oss-120b.json")
    assert graphs(model, 1024, 8192) == graphs(model, 1024, 1024)
    g = graphs(model, 1024, 8192)
    assert (g.piecewise, g.full, g.largest) == (83, 83, 1024)
    assert graphs(model, 1024, 256).largest == 256
    # a token budget off the grid is captured as well (vllm/config/vllm.py:1701-1706 at
    # v0.22.0): 1, 2, 4, 31 sizes 8-248, 47 sizes 256-992, then 1,000
    g = graphs(model, 1024, 1000)
    assert (g.piecewise, g.full, g.largest) == (3 + 31 + 47 + 1, 82, 1000)


def test_estimate_by_hand():
    """One first capture shared by both modes, then each further graph of a mode; vLLM's
    floor of 1 MiB a graph; nothing without graphs."""
    assert estimate_bytes(51, 35) == FIRST_CAPTURE_BYTES + 84 * PER_GRAPH_BYTES
    assert estimate_bytes(1, 1) == FIRST_CAPTURE_BYTES
    assert estimate_bytes(3, 0, first=0, each=0) == 2 * 2**20
    assert estimate_bytes(0, 0) == 0


def test_constants_are_the_declared_fit():
    """FIRST_CAPTURE_BYTES and PER_GRAPH_BYTES are fit() over the 'fit' rows (every row whose
    vLLM ran the pinned commit's two-sample estimator, 0.18.0-0.25.1), and SPREAD spread()
    over them, as benchmarks/fit_cudagraph.py prints them."""
    rows = [point(r) for r in ROWS if r["role"] == "fit"]
    first, each = fit(rows)
    assert (first, each) == (pytest.approx(FIRST_CAPTURE_BYTES, abs=1),
                             pytest.approx(PER_GRAPH_BYTES, abs=1))
    assert spread(rows) == (pytest.approx(SPREAD[0], abs=1e-4),
                            pytest.approx(SPREAD[1], abs=1e-4))


def test_spread_by_hand():
    """spread() is the lowest and highest logged / left-out prediction. Three rows at 0, 10
    and 20 further graphs logging 1, 3 and 3 GiB: without the first, the fit is flat at
    3 GiB (1/3); without the second, 1 GiB + 0.1 a graph predicts 2 (3/2); without the
    third, 1 + 0.2 a graph predicts 5 (3/5)."""
    rows = [(1, 1, 1.0), (11, 1, 3.0), (21, 1, 3.0)]
    assert spread(rows) == (pytest.approx(1 / 3), pytest.approx(3 / 2))


def test_held_to_every_logged_estimate():
    """The model against every logged 'Estimated CUDA graph memory': the two single-token
    captures +2% and -15%; every 'fit' row from -60% (1.21 GiB logged for 18 graphs of
    Qwen3.6-35B-A3B) to +500% (0.08 GiB for Qwen3-0.6B's 18), left out of its own fit from
    -67% to +555%; vLLM 0.26's changed estimator +126% and +41%. Logs of the same 86 graphs
    range from 0.52 to 2.35 GiB (Qwen3-8B 0.52 on a 24 GB GPU, 2.35 on an A100): the two
    constants are a fit through that spread, not a prediction tighter than it."""
    fitted = [point(r) for r in ROWS if r["role"] == "fit"]
    errors, left_out = [], []
    for r in ROWS:
        p, f, gib = point(r)
        errors.append(estimate_bytes(p, f) / GiB / gib - 1)
        if r["role"] == "fit":
            others = [point(o) for o in ROWS if o["role"] == "fit" and o is not r]
            left_out.append(estimate_bytes(p, f, *fit(others)) / GiB / gib - 1)
    single = [e for r, e in zip(ROWS, errors) if r["piecewise"] == 1]
    assert sorted(single) == [pytest.approx(-0.15, abs=0.01), pytest.approx(0.02, abs=0.01)]
    inside = [e for r, e in zip(ROWS, errors) if r["role"] == "fit"]
    assert (min(inside), max(inside)) == (pytest.approx(-0.60, abs=0.01),
                                          pytest.approx(5.00, abs=0.01))
    assert (min(left_out), max(left_out)) == (pytest.approx(-0.67, abs=0.01),
                                              pytest.approx(5.55, abs=0.01))
    # the spread is the same rows' ratios the other way up
    assert SPREAD == (pytest.approx(1 / (1 + max(left_out)), abs=1e-4),
                      pytest.approx(1 / (1 + min(left_out)), abs=1e-4))
    later = [e for r, e in zip(ROWS, errors) if r["role"] == "later"]
    assert later == [pytest.approx(1.26, abs=0.01), pytest.approx(0.41, abs=0.01)]
    same = [r["estimate_gib"] for r in ROWS if (r["piecewise"], r["full"]) == (51, 35)]
    assert (min(same), max(same)) == (0.52, 2.35)


def test_subtracted_by_default_and_overridden():
    """serve subtracts the modelled estimate unless given (--cudagraph-gib: 0 for vLLM
    before 0.21) or --enforce-eager (no graphs); --kv-cache-memory-bytes skips it all."""
    cfg = dict(tp=8, context=8192)
    default = serve(llama3_70b(), ServeConfig(**cfg), H100).stages[0].budget
    assert default.cudagraph_bytes == estimate_bytes(51, 51)  # max_num_seqs 1024 on H100
    eager = serve(llama3_70b(), ServeConfig(enforce_eager=True, **cfg), H100).stages[0].budget
    given = serve(llama3_70b(), ServeConfig(cudagraph_bytes=0.0, **cfg), H100).stages[0].budget
    assert eager.cudagraph_bytes == given.cudagraph_bytes == 0 and eager.graphs is None
    assert given.available_bytes - default.available_bytes == default.cudagraph_bytes
    kv = serve(llama3_70b(), ServeConfig(kv_cache_memory_bytes=GiB, **cfg), H100)
    assert kv.stages[0].budget.available_bytes == GiB


def test_cli_flags(capsys):
    from ledger.cli import main

    base = ["serve", "llama3-70b", "--tp", "8", "--context", "8192", "--gpu", "h100-sxm",
            "--json"]
    outs = []
    for extra in ([], ["--enforce-eager"], ["--cudagraph-gib", "0.5"]):
        assert main(base + extra) == 0
        outs.append(json.loads(capsys.readouterr().out)["stages"][0]["memory"])
    assert outs[0]["cudagraphs"] == {"piecewise": 51, "full": 51, "largest": 512}
    assert outs[1]["cudagraph_bytes"] == 0 and outs[1]["cudagraphs"] is None
    assert outs[2]["cudagraph_bytes"] == 0.5 * GiB


def test_benchmark_prints_the_fit():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from fit_cudagraph import table
    finally:
        sys.path.pop(0)
    lines = table()
    assert lines[0].startswith(f"first capture {FIRST_CAPTURE_BYTES:,} B")
    assert len(lines) == 5 + len(ROWS)


def test_docs_hold_the_fit_table():
    """docs/serve.md holds benchmarks/fit_cudagraph.py's output line for line."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from fit_cudagraph import table
    finally:
        sys.path.pop(0)
    page = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8").splitlines()
    for line in table():
        assert line in page


OSS = ROOT / "tests" / "fixtures" / "serve" / "gpt-oss-120b.json"


def gpt_oss(**kw):
    model, _ = read_hf_config(OSS)
    return serve(model, ServeConfig(quant=read_hf_quant(OSS), **kw), H100)


def test_gpt_oss_defaults_rest_on_the_graph_estimate():
    """gpt-oss-120b on one H100 at the pinned defaults with 131,072 tokens: the sourced terms
    leave 5.57 GiB for the cache and the graph estimate, a request needs 4.79 GiB, so it
    starts only while vLLM's estimate is at most 0.79 GiB (by hand: what the terms leave
    less the request). The model's 1.52 GiB fails it; the logged spread (x0.15 to x3.03:
    0.23 to 4.60 GiB) holds both verdicts - one sequence at its low end, none at its high
    one - so the margin is not settled."""
    est = gpt_oss(context=131072)
    b, m = est.stages[0].budget, est.graph_margin
    assert not est.starts and b.cudagraph_bytes / GiB == pytest.approx(1.52, abs=0.01)
    assert m.threshold_bytes == b.available_bytes + b.cudagraph_bytes - est.pool.request_bytes
    assert m.threshold_bytes / GiB == pytest.approx(0.79, abs=0.01)
    assert (m.low_bytes, m.high_bytes) == (pytest.approx(b.cudagraph_bytes * SPREAD[0]),
                                           pytest.approx(b.cudagraph_bytes * SPREAD[1]))
    assert m.low_bytes < m.threshold_bytes < b.cudagraph_bytes < m.high_bytes
    assert (m.sequences_low, m.sequences_high, m.settled) == (1, 0, False)
    # the low end is the pool priced with that estimate given
    low = gpt_oss(context=131072, cudagraph_bytes=m.low_bytes)
    assert low.starts and low.max_sequences == m.sequences_low


def test_settled_verdicts_across_the_spread():
    """Where the spread holds one verdict the margin says so: 0.95 with 32,768 tokens starts
    at both ends (5 to 2 sequences), 0.97 with 85K (issue #33155's start) too, and the
    failures of the users' vLLM 0.10 settings (0.9, Marlin, the sort sampler) fail even
    with no estimate at all (the threshold is below zero)."""
    for kw, seqs in ((dict(context=32768, gpu_memory_utilization=0.95), (5, 2)),
                     (dict(context=85 * 1024, gpu_memory_utilization=0.97), (2, 1))):
        est = gpt_oss(**kw)
        m = est.graph_margin
        assert est.starts and m.settled and (m.sequences_low, m.sequences_high) == seqs
    failing = gpt_oss(context=131072, gpu_memory_utilization=0.9, mxfp4_backend="marlin",
                      sampler="sort")
    m = failing.graph_margin
    assert not failing.starts and m.settled and m.threshold_bytes < 0


def test_no_margin_without_a_modelled_estimate():
    """A given estimate, --enforce-eager and --kv-cache-memory-bytes leave nothing modelled."""
    for kw in (dict(cudagraph_bytes=0.5 * GiB), dict(enforce_eager=True),
               dict(kv_cache_memory_bytes=GiB)):
        assert gpt_oss(context=131072, **kw).graph_margin is None


def test_cli_names_an_unsettled_verdict(capsys):
    """The text adds a margin line only where the spread holds both verdicts; the JSON
    always carries the margin. The exit status stays the point estimate's (1: it would not
    start)."""
    from ledger.cli import main

    base = ["serve", str(OSS), "--gpu", "h100-sxm"]
    assert main(base + ["--context", "131072"]) == 1
    text = capsys.readouterr().out
    assert "CUDA-graph margin" in text and "within the estimate's uncertainty" in text
    assert "at most 807.15 MiB" in text
    assert main(base + ["--context", "32768", "--gpu-memory-utilization", "0.95"]) == 0
    assert "CUDA-graph margin" not in capsys.readouterr().out
    assert main(base + ["--context", "131072", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)["cudagraph_margin"]
    assert out["settled"] is False and (out["max_sequences_low"], out["max_sequences_high"]) \
        == (1, 0)
    assert out["spread"] == list(SPREAD)
