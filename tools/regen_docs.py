"""Re-run every ``console`` block in README.md and docs/*.md and write what the command prints
now in place of what the page says (tests/test_docs.py holds the two equal); then every
block of benchmark output the pages quote (tools/doc_quotes.py; tests/test_doc_quotes.py
holds them), each script run once: a quote is replaced by the printed lines from the one
whose label (``_key``) is its first line's to the one whose label is its last
line's, or, where those do not bracket a run, line by line by label.

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
VOLATILE = re.compile(r"costed in [0-9.]+ s \([0-9,]+/s\)")  # as tests/test_docs.py masks


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
        # a line that differs only in a search's wall-clock time and rate stays as it was
        new = [old[k] if k < len(old) and VOLATILE.sub("", old[k]) == VOLATILE.sub("", n)
               else n for k, n in enumerate(new)]
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


def _key(line: str) -> str:
    """A printed line's label: its first 32 characters, or what comes before a figure in
    them where that is a label of its own (8 characters or more)."""
    head = re.split(r"[0-9]", line[:32])[0]
    return (head if len(head.strip()) >= 8 else line[:32]).rstrip()


def _requote(printed: list[str], quoted: tuple) -> list[str]:
    keys = [_key(x) for x in printed]
    first, last = _key(quoted[0]), _key(quoted[-1])
    if printed and first == keys[0] and last not in keys:  # a whole output whose end changed
        return printed
    if first in keys:
        s = keys.index(first)
        ends = [e for e in range(s, len(keys)) if keys[e] == last]
        if ends:  # the run whose length is nearest the quote's
            e = min(ends, key=lambda e: abs(e - s + 1 - len(quoted)))
            return printed[s:e + 1]
    by_key = {}
    for k, line in zip(keys, printed):
        by_key.setdefault(k, []).append(line)
    return [by_key[_key(q)][0] if len(by_key.get(_key(q), ())) == 1 else q for q in quoted]


def regen_quotes(pages) -> list[Path]:
    """Rewrite the benchmark-output quotes of ``pages``; the pages rewritten."""
    import subprocess

    from doc_quotes import quotes

    found = {p: quotes(p) for p in pages}
    runs = {}
    for script in sorted({q.script for qs in found.values() for q in qs}):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        done = subprocess.run([sys.executable, str(ROOT / script)], capture_output=True,
                              text=True, env=env, cwd=ROOT, check=True)
        runs[script] = [line.rstrip() for line in done.stdout.splitlines()]
    changed = []
    for page, qs in found.items():
        lines = page.read_text(encoding="utf-8").splitlines()
        for q in sorted(qs, key=lambda q: -q.start):  # from the bottom: starts stay valid
            lines[q.start:q.start + len(q.lines)] = _requote(runs[q.script], q.lines)
        new = "\n".join(lines) + "\n"
        if new != page.read_text(encoding="utf-8"):
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    pages = [Path(p) for p in sys.argv[1:]] or [ROOT / "README.md",
                                                 *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        if regen(page):
            print(f"rewrote {page}")
    sys.path.insert(0, str(ROOT / "tools"))
    for page in regen_quotes(pages):
        print(f"rewrote the quotes of {page}")
