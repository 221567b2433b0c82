"""The blocks of benchmark output the docs quote: a fenced block that is not a ``console``
block, right after a paragraph that names ``python benchmarks/NAME.py`` and ends with a
colon, quotes lines that script prints (the last script the paragraph names). Used by
tools/regen_docs.py (to rewrite them) and tests/test_doc_quotes.py (to hold them)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
SCRIPT = re.compile(r"`python (benchmarks/\w+\.py)[^`]*`")


@dataclass(frozen=True)
class Quote:
    page: str      # the page's name under docs/ (or README.md)
    script: str    # benchmarks/NAME.py
    start: int     # index of the block's first line in the page's lines
    lines: tuple   # the quoted lines


def quotes(page: Path) -> list[Quote]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        k, para = i - 1, []
        while k >= 0 and not lines[k].strip():
            k -= 1
        while k >= 0 and lines[k].strip():
            para.insert(0, lines[k])
            k -= 1
        text = " ".join(para).rstrip()
        names = SCRIPT.findall(text)
        if m[1] != "console" and names and text.endswith(":"):
            out.append(Quote(page.name, names[-1], i + 1, tuple(lines[i + 1:j])))
        i = j + 1
    return out


def every_quote() -> list[Quote]:
    return [q for page in PAGES for q in quotes(page)]


def slice_of(printed: list[str], quoted: tuple) -> int | None:
    """Where ``quoted`` (right-stripped) runs contiguously in ``printed``, or None."""
    want = [x.rstrip() for x in quoted]
    have = [x.rstrip() for x in printed]
    for s in range(len(have) - len(want) + 1):
        if have[s:s + len(want)] == want:
            return s
    return None
