"""Every console block in the README and in docs/*.md is what the command next to it prints,
and every relative link in them points at a file that exists.

A block is a ```console fence; each ``$ train-ledger ...`` line is run in-process and its
output compared line by line with the lines below it. A line ``...`` in the README stands
for lines left out; words that change from run to run (a search's wall-clock time and
rate) are masked on both sides.
"""
import re
import shlex
import shutil
from pathlib import Path

import pytest

from ledger.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VOLATILE = [(re.compile(r"costed in [0-9.]+ s \([0-9,]+/s\)"), "costed in T s (R/s)")]


def _blocks():
    for page in PAGES:
        yield from _page_blocks(page)


def _page_blocks(page: Path):
    text = page.read_text(encoding="utf-8")
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        cmd, out = None, []
        for line in block.splitlines():
            if line.startswith("$ "):
                if cmd:
                    yield cmd, out
                cmd, out = line[2:], []
            else:
                out.append(line)
        if cmd:
            yield cmd, out


def _mask(line: str) -> str:
    for pattern, repl in VOLATILE:
        line = pattern.sub(repl, line)
    return line.rstrip()


CASES = list(_blocks())


def test_the_readme_has_console_blocks():
    assert len(list(_page_blocks(ROOT / "README.md"))) >= 3
    assert len(CASES) >= 15


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text)
    missing = [link for link in links if not (page.parent / link).exists()]
    assert missing == [], missing


@pytest.mark.parametrize("cmd,expected", CASES, ids=[c for c, _ in CASES])
def test_console_block_is_reproducible(cmd, expected, capsys, tmp_path, monkeypatch):
    argv = shlex.split(cmd)
    assert argv[0] == "train-ledger"
    for folder in ("examples", "docs"):  # the files the blocks read, and where they write
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)  # a block that writes a file writes it there, not here
    code = main(argv[1:])
    refused = any(line.startswith("error:") for line in expected)
    wont_start = any("would refuse to start" in line for line in expected)  # serve: exit 1
    assert code == (2 if refused else 1 if wont_start else 0), (cmd, code)
    captured = capsys.readouterr()
    got = [_mask(x) for x in (captured.out + captured.err).splitlines()]
    want = [_mask(x) for x in expected]
    if "..." in [w.strip() for w in want]:  # a truncated listing: its head must match
        head = want[:[w.strip() for w in want].index("...")]
        assert got[:len(head)] == head
    else:
        assert got == want
