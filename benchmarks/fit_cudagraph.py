"""vLLM's CUDA-graph estimate: the two constants of ledger.serve.graphs (first capture, each
further graph) fitted by least squares on the 'fit' rows of
tests/fixtures/serve/cudagraph_logs.json, then every row: the fit's prediction, each 'fit'
row also left out of its own fit, and the 'later' rows (vLLM 0.26 on). The shipped
FIRST_CAPTURE_BYTES and PER_GRAPH_BYTES are the first line, SPREAD the second: the lowest and
highest ratio of a 'fit' row's logged estimate to its left-out prediction
(tests/test_serve_graphs.py). The third line compares vLLM's estimate with the pool its
graphs then took, where a log has both ("Graph capturing finished in N secs, took Y GiB"):
how well vLLM's own measurement stands for the memory it reserves; not used in the fit."""
import json
from pathlib import Path
from statistics import median

from ledger.serve.graphs import estimate_bytes, fit, spread

LOGS = Path(__file__).parents[1] / "tests" / "fixtures" / "serve" / "cudagraph_logs.json"
GiB = 2**30


def rows() -> list[dict]:
    return json.loads(LOGS.read_text())["rows"]


def point(r: dict) -> tuple[int, int, float]:
    return r["piecewise"], r["full"], r["estimate_gib"]


def captured_line(rs: list[dict]) -> str:
    ratios = sorted(r["estimate_gib"] / r["captured_gib"] for r in rs if r["captured_gib"])
    near = sum(1 for x in ratios if abs(x - 1) <= 0.25)
    return (f"estimate / captured pool, {len(ratios)} logs with both: x{ratios[0]:.2f} to "
            f"x{ratios[-1]:.2f}, median x{median(ratios):.2f}, {near} within 25%")


def table() -> list[str]:
    rs = rows()
    fitted = [point(r) for r in rs if r["role"] == "fit"]
    first, each = fit(fitted)
    out = [f"first capture {first:,.0f} B ({first / GiB:.3f} GiB), each further graph "
           f"{each:,.0f} B ({each / 2**20:.2f} MiB), fitted on {len(fitted)} rows",
           "logged / left-out prediction: x{:.4f} to x{:.4f}".format(*spread(fitted)),
           captured_line(rs),
           "| model | GPU | TP | vLLM | graphs (piecewise + full, largest) | logged | "
           "predicted | error | left-out prediction | error | role |",
           "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rs:
        p, f, gib = point(r)
        pred = estimate_bytes(p, f, first, each) / GiB
        if r["role"] == "fit":
            others = [point(o) for o in rs if o["role"] == "fit" and o is not r]
            loo = estimate_bytes(p, f, *fit(others)) / GiB
            left = f"{loo:.2f} GiB | {100 * (loo / gib - 1):+.0f}%"
        else:
            left = "- | -"
        out.append(f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['vllm']} | {p} + {f} "
                   f"({r['piecewise_largest']}) | {gib:.2f} GiB | {pred:.2f} GiB | "
                   f"{100 * (pred / gib - 1):+.0f}% | {left} | {r['role']} |")
    return out


if __name__ == "__main__":
    print("\n".join(table()))
