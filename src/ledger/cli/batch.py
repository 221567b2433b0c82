"""``estimate --batch FILE``: many placements sized in one process. Each line of FILE holds
one estimate's own flags (``--tp 8 --pp 4 --dp 4``), read after the command line's (which
give the model, the GPU and what every line shares); blank lines and ``#`` comments are
skipped. A line refused is refused in one line naming its number. Output: one row per line
(step, MFU, memory, fits), or with ``--json`` the list of each line's ``estimate --json``.
"""
from __future__ import annotations

import json
import shlex

from ledger.errors import LedgerError

MAX_LINES = 100_000  # placements one batch may hold


def without(argv: list[str], flag: str, takes_value: bool) -> list[str]:
    """``argv`` less ``flag`` (and its value)."""
    out, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == flag:
            skip = takes_value
            continue
        if takes_value and word.startswith(flag + "="):
            continue
        out.append(word)
    return out


def lines_of(path: str) -> list[tuple[int, list[str]]]:
    """(line number, its flags) of each placement line."""
    from ledger.io.files import read_text

    out = []
    for n, line in enumerate(read_text(path, "batch").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            out.append((n, shlex.split(text)))
        except ValueError as e:
            raise LedgerError("batch", f"{path} line {n}: {e}") from None
    if not out:
        raise LedgerError("batch", f"{path} holds no placement line")
    if len(out) > MAX_LINES:
        raise LedgerError("batch", f"{path} holds {len(out):,} lines, over {MAX_LINES:,}")
    return out


def run_batch(argv: list[str], path: str, as_json: bool, run) -> str:
    """Each line run as ``estimate`` with the command line's flags and its own."""
    base = without(without(argv, "--batch", True), "--json", False)
    rows = []
    for n, flags in lines_of(path):
        try:
            out = run(base + flags + ["--json"])
        except LedgerError as e:
            raise LedgerError("batch", f"{path} line {n}: {e}") from None
        text = out[0] if isinstance(out, tuple) else out
        rows.append((" ".join(flags), json.loads(text)))
    if as_json:
        return json.dumps([d | {"line": flags} for flags, d in rows], indent=1,
                          allow_nan=False)
    head = f"  {'#':>3}  {'step':>9}  {'MFU':>6}  {'memory':>10}  {'fits':<4}  flags"
    body = [f"  {i:>3}  {d['step_time_s']:8.3f}s  {d['mfu']:6.1%}  "
            f"{d['memory_per_gpu_bytes'] / 2**30:6.2f} GiB  {'yes' if d['fits'] else 'no':<4}  "
            f"{flags}" for i, (flags, d) in enumerate(rows, 1)]
    return "\n".join([f"{len(rows)} placements of {rows[0][1]['model']} sized in one "
                      f"process", head, *body])
