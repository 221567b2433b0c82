"""Re-run every ``console`` block in README.md and docs/*.md and write what the command prints
now in place of what the page says (tests/test_docs.py holds the two equal).

For after a change that moves figures on purpose, e.g. a merge of two branches that each
regenerated their blocks: read ``git diff`` of the pages afterwards, since every line this
rewrites is a claim the docs make. A block whose expected lines hold ``...`` keeps that many
leading lines, then ``...``. Usage: ``python tools/regen_docs.py [PAGE ...]``.
"""
import contextlib
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: str) -> list[str]:
    from ledger.cli import main
    argv = shlex.split(cmd)[1:]
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ("examples", "docs"):
            shutil.copytree(ROOT / folder, Path(tmp) / folder)
        os.chdir(tmp)
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(argv)
        finally:
            os.chdir(here)
    return [line.rstrip() for line in (out.getvalue() + err.getvalue()).splitlines()]


def _block(body: str) -> str:
    lines, out, i = body.splitlines(), [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
            continue
        cmd, j = lines[i], i + 1
        while j < len(lines) and not lines[j].startswith("$ "):
            j += 1
        old = lines[i + 1:j]
        new = _run(cmd[2:])
        stripped = [x.strip() for x in old]
        if "..." in stripped:
            k = stripped.index("...")
            new = new[:k] + [old[k]] + old[k + 1:]
        out += [cmd, *new]
        i = j
    return "\n".join(out) + "\n"


def regen(page: Path) -> bool:
    text = page.read_text(encoding="utf-8")
    new = re.sub(r"(```console\n)(.*?)(```)", lambda m: m[1] + _block(m[2]) + m[3], text,
                 flags=re.S)
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    pages = [Path(p) for p in sys.argv[1:]] or [ROOT / "README.md",
                                                 *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        if regen(page):
            print(f"rewrote {page}")
