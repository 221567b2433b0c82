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



def _code_blocks():
    """(page, [(kind, text), ...]) of the pages with ```python or ```pycon blocks."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        blocks = re.findall(r"```(python|pycon)\n(.*?)```", text, re.S)
        if blocks:
            yield page.name, blocks


CODE = list(_code_blocks())


def _hub_cache(root: Path) -> None:
    """The local Hugging Face cache the pages' hub ids read: Qwen/Qwen3-8B's config.json
    (tests/fixtures/hf/released), under refs/main's snapshot."""
    folder = root / "models--Qwen--Qwen3-8B"
    (folder / "snapshots" / "r1").mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("r1")
    shutil.copy(ROOT / "tests" / "fixtures" / "hf" / "released" / "qwen3-8b.json",
                folder / "snapshots" / "r1" / "config.json")


def test_the_api_page_and_readme_have_code():
    kinds = {(page, kind) for page, blocks in CODE for kind, _ in blocks}
    assert {("api.md", "pycon"), ("README.md", "pycon")} <= kinds


@pytest.mark.parametrize("page,blocks", CODE, ids=[p for p, _ in CODE])
def test_code_blocks_run(page, blocks, tmp_path, monkeypatch):
    """A page's ```python blocks run; its ```pycon blocks, in order and sharing their names,
    are a doctest whose every result holds."""
    import doctest

    for folder in ("examples", "docs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    _hub_cache(tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    for kind, block in blocks:
        if kind == "python":
            exec(compile(block, page, "exec"), {})
    session = "\n".join(block for kind, block in blocks if kind == "pycon")
    test = doctest.DocTestParser().get_doctest(session, {}, page, page, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
