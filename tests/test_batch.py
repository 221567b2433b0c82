"""estimate --batch FILE: a line of flags each, sized in one process (issue 34 item 5: a
24-point --json sweep spent most of its 22 s starting processes)."""
import json

from test_bad_input import run

LINES = "# tp x pp on 64 GPUs\n--tp 8 --pp 1 --dp 8\n\n--tp 8 --pp 2 --dp 4  # two stages\n" \
        "--tp 4 --pp 4 --dp 4 --micro-batch 2\n"
BASE = ["estimate", "llama3-70b", "--global-batch", "256"]


def test_each_line_is_the_estimate_it_would_be_alone(tmp_path):
    path = tmp_path / "sweep.txt"
    path.write_text(LINES)
    code, out, err = run(BASE + ["--batch", str(path), "--json"])
    assert code == 0, err
    rows = json.loads(out)
    assert [r["line"] for r in rows] == ["--tp 8 --pp 1 --dp 8", "--tp 8 --pp 2 --dp 4",
                                         "--tp 4 --pp 4 --dp 4 --micro-batch 2"]
    for r in rows:
        _, alone, _ = run(BASE + r["line"].split() + ["--json"])
        assert json.loads(alone) == {k: v for k, v in r.items() if k != "line"}


def test_the_text_is_a_row_a_placement(tmp_path):
    path = tmp_path / "sweep.txt"
    path.write_text(LINES)
    code, out, _ = run(BASE + ["--batch", str(path)])
    lines = out.splitlines()
    assert code == 0 and lines[0] == "3 placements of llama3-70b sized in one process"
    assert len(lines) == 5 and lines[4].endswith("--tp 4 --pp 4 --dp 4 --micro-batch 2")


def test_a_bad_line_is_refused_by_its_number(tmp_path):
    path = tmp_path / "sweep.txt"
    path.write_text(LINES + "--tp 3 --dp 8\n")
    code, out, err = run(BASE + ["--batch", str(path)])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"error: batch: {path} line 6: heads: heads(64) is not divisible by tp(3)" in err
