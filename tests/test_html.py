"""--html: one self-contained page per report, estimate and plan, loaded in a real headless
browser (Debian's chromium; `make browser` installs it): no console errors, the page's
own script ran to its end, and the screenshot shows each chart's colours."""
import contextlib
import io
import re
import shutil
import subprocess

import numpy as np
import pytest

from ledger.cli import main
from ledger.render import COLOURS, LINKS, RUN_COLOURS, TIME
from png import read_png

CHROMIUM = shutil.which("chromium")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed: run `make browser` as root "
                             "(apt-get install chromium) to test the HTML report in a browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-logging=stderr", "--v=0", "--hide-scrollbars"]
ESTIMATE = ["estimate", "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "2", "--dp", "8",
            "--zero", "1", "--global-batch", "256"]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def chromium(tmp_path, page, *extra):
    """Load ``page`` once; (stdout, stderr) of the browser."""
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra,
                        page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, r.stderr


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    out = {k: d / f"{k}.html" for k in ("estimate", "report", "plan", "run", "plan-run")}
    assert run(*ESTIMATE, "--html", str(out["estimate"]))[0] == 0
    assert run(*ESTIMATE, "--tokens", "1e12", "--usd-per-gpu-hour", "2", "--gpu-mtbf-hours",
               "2000", "--html", str(out["run"]))[0] == 0
    assert run("plan", "llama3-8b", "--gpus", "64", "--global-batch", "256", "--top", "3",
               "--tokens", "1e12", "--html", str(out["plan-run"]))[0] == 0
    assert run("report", "llama3-8b", "--pp", "4", "--microbatches", "8", "--gpu", "h100-sxm",
               "--html", str(out["report"]))[0] == 0
    assert run("plan", "llama3-8b", "--gpus", "64", "--global-batch", "256", "--top", "5",
               "--baseline", "tp=2,pp=2", "--html", str(out["plan"]))[0] == 0
    return out


@pytest.mark.parametrize("kind", ["estimate", "report", "plan", "run", "plan-run"])
def test_pages_are_self_contained(pages, kind):
    html = pages[kind].read_text()
    urls = set(re.findall(r"https?://[^\s\"'<>]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # a namespace name, never fetched
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", html)
    svgs = re.findall(r"<svg\b[^>]*>", html)
    assert svgs and all("viewBox=" in s for s in svgs)


def test_plan_page_has_the_ranked_table_and_baseline(pages):
    html = pages["plan"].read_text()
    assert html.count("<tr>") >= 6  # header + 5 plans
    assert 'class="baseline"' in html and "baseline tp=2,pp=2" in html


@needs_browser
def test_broken_page_is_caught(tmp_path):
    """The checks below can fail: a page whose script throws is not marked ok and its
    error reaches the browser's console log."""
    page = tmp_path / "bad.html"
    from ledger.render import page as make_page
    page.write_text(make_page("bad", ["<script>nosuchfunction();</script>"]))
    dom, err = chromium(tmp_path, page, "--dump-dom")
    assert 'data-ok="yes"' not in dom and 'data-errors="1"' in dom
    assert any("Uncaught ReferenceError" in line for line in console_lines(err))


def test_run_page_shows_the_run_beside_the_step(pages):
    """The whole run sits right after the step breakdown: days by cause, cost, goodput."""
    html = pages["run"].read_text()
    step, whole = html.index("Where the step time goes"), html.index("The whole run")
    assert step < whole < html.index("Bytes per GPU per step")
    for part in ("training", "checkpointing", "failure loss", "cost $", "goodput"):
        assert part in html[whole:], part
    assert "#1: the whole run" in pages["plan-run"].read_text()


@needs_browser
@pytest.mark.parametrize("kind", ["estimate", "report", "plan", "run"])
def test_page_loads_without_errors(pages, tmp_path, kind):
    dom, err = chromium(tmp_path, pages[kind], "--dump-dom")
    assert re.search(r'<div id="page-status"[^>]*data-ok="yes"', dom), dom[:500]
    assert console_lines(err) == []


def colour_pixels(img: np.ndarray, hex_or_rgb) -> int:
    rgb = hex_or_rgb if isinstance(hex_or_rgb, tuple) else \
        tuple(int(hex_or_rgb[i:i + 2], 16) for i in (1, 3, 5))
    return int((np.abs(img[:, :, :3].astype(int) - np.array(rgb)).max(axis=2) <= 2).sum())


@needs_browser
def test_screenshot_shows_the_charts(pages, tmp_path):
    shot = tmp_path / "estimate.png"
    chromium(tmp_path, pages["estimate"], f"--screenshot={shot}", "--window-size=1280,1800")
    img = read_png(shot.read_bytes())
    assert img.shape[:2] == (1800, 1280)
    # each chart's own colour fills bars, not just a legend swatch (12 x 12 = 144 px)
    counts = {"memory: state": colour_pixels(img, COLOURS["state"]),
              "memory: activations": colour_pixels(img, COLOURS["activations"]),
              "step time": colour_pixels(img, TIME),
              "bytes: nvlink": colour_pixels(img, LINKS["nvlink"]),
              # render_timeline: micro-batch 0's forward is hsl(0, 65%, 78%) = (235, 162, 162)
              "time line: F0": colour_pixels(img, (235, 162, 162))}
    assert all(n > 1000 for n in counts.values()), counts
    # and the rest of the page is mostly white background
    white = int((img[:, :, :3] == 255).all(axis=2).sum())
    assert 0.5 < white / (img.shape[0] * img.shape[1]) < 0.99


@needs_browser
def test_screenshot_shows_the_run(pages, tmp_path):
    """The run's stacked bar: training, checkpointing and failure loss each drawn (a GPU
    failing every 2,000 hours makes the failure share visible)."""
    shot = tmp_path / "run.png"
    chromium(tmp_path, pages["run"], f"--screenshot={shot}", "--window-size=1280,2400")
    img = read_png(shot.read_bytes())
    counts = {k: colour_pixels(img, c) for k, c in RUN_COLOURS.items()}
    assert counts["training"] > 10000 and counts["failure loss"] > 300, counts
    assert counts["checkpointing"] > 144, counts  # more than its legend swatch
