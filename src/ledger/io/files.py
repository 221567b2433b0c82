"""The one reader of the files a user hands over: its text, or a JSON / TOML table, or
one line saying why not.

Every file is read the same way, so that no input can hang the reader or exhaust memory:
the path is ``os.stat``-ed first and only a regular file is opened (a FIFO, a device, a
socket or a folder is refused in one line; the open is non-blocking, so a file swapped for
a FIFO after the check cannot block it either), at most its kind's cap plus one byte is
read (``CAPS``, stated in docs/inputs.md), and every error of the decoders and parsers
(not UTF-8, nesting past the parser's recursion, an integer of more digits than Python
converts, malformed syntax) becomes one ``LedgerError`` naming the file and the cause.
A page written back (``--html``, ``--svg``) goes through ``write_whole``: a temporary
file beside it, renamed into place, so it is never seen torn.

>>> human(16 << 20)
'16 MiB'
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import tempfile
import tomllib
from pathlib import Path

from ledger.errors import LedgerError, clip

MiB = 1 << 20
# The most bytes read of each kind of input, by the field its errors are reported under.
# Each is over 10x the largest real file of its kind we hold (tests/fixtures): HF
# config.json files are under 100 KiB (the largest, with label tables, ~1 MiB); launch
# scripts and job TOMLs under 40 KiB (the bash reader takes ~4 s over 1 MiB of script);
# system and phase files are a few lines.
CAPS = {"model": 16 * MiB, "config.json": 16 * MiB, "from_megatron": 1 * MiB,
        "from_torchtitan": 1 * MiB, "system": 1 * MiB, "phases": 1 * MiB}
DEFAULT_CAP = 4 * MiB
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def human(n: int) -> str:
    """Bytes in IEC units, as the caps are stated."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def read_bytes(path: str | Path, what: str, cap: int | None = None) -> bytes:
    """At most ``cap`` bytes of a regular file (``CAPS[what]`` by default), or a one-line
    refusal under ``what``."""
    cap = CAPS.get(what, DEFAULT_CAP) if cap is None else cap
    name = clip(str(path))
    if str(path) == "":
        raise LedgerError(what, "the path is empty ('')")
    try:
        _check_kind(os.stat(path), name, what, cap)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LedgerError(what, f"no such file: {name}") from None
    except OSError as e:
        raise LedgerError(what, _os_cause(e, name)) from None
    try:
        _check_kind(os.fstat(fd), name, what, cap)  # the file opened is the file checked
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(cap + 1 - size, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise LedgerError(what, _os_cause(e, name)) from None
    finally:
        os.close(fd)
    if size > cap:  # it grew while read
        raise LedgerError(what, f"{name} is over {human(cap)}, the most read for {what} "
                                f"(docs/inputs.md)")
    return b"".join(chunks)


def _check_kind(st: os.stat_result, name: str, what: str, cap: int) -> None:
    for test, kind in _KINDS:
        if test(st.st_mode):
            raise LedgerError(what, f"{name} is {kind}, not a regular file")
    if st.st_size > cap:
        raise LedgerError(what, f"{name} is {human(st.st_size)}, over the {human(cap)} read "
                                f"for {what} (docs/inputs.md)")


def _os_cause(e: OSError, name: str) -> str:
    if e.errno == errno.ELOOP:
        return f"{name} is a loop of symbolic links"
    return f"cannot read {name}: {e.strerror or e}"


def read_text(path: str | Path, what: str, expected: str = "", cap: int | None = None) -> str:
    """The file's UTF-8 text (``read_bytes``), or a one-line refusal under ``what``."""
    data = read_bytes(path, what, cap)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LedgerError(what, f"{clip(str(path))} is not UTF-8 text (byte "
                                f"0x{data[e.start]:02x} at offset {e.start:,})"
                                + (f"; {expected} expected" if expected else "")) from None


def parse_json(text: str, path: str | Path, what: str, constants: bool = False):
    """JSON text parsed, every parser error one line; NaN / Infinity refused unless
    ``constants`` (a config.json may hold them in keys its reader never prices)."""
    hook = {} if constants else {"parse_constant": lambda c: _refuse_constant(path, c, what)}
    return _parsed(lambda: json.loads(text, **hook), path, what, "JSON")


def parse_toml(text: str, path: str | Path, what: str) -> dict:
    """TOML text parsed, every parser error one line."""
    return _parsed(lambda: tomllib.loads(text), path, what, "TOML")


def _parsed(parse, path, what: str, fmt: str):
    name = clip(str(path))
    try:
        return parse()
    except RecursionError:
        raise LedgerError(what, f"{name} nests deeper than the {fmt} reader follows") from None
    except json.JSONDecodeError as e:
        raise LedgerError(what, f"{name} is not valid JSON ({e.msg} at line {e.lineno} "
                                f"column {e.colno})") from None
    except tomllib.TOMLDecodeError as e:
        raise LedgerError(what, f"{name} is not valid TOML: {clip(str(e))}") from None
    except LedgerError:
        raise
    except ValueError as e:
        if "integer string conversion" in str(e):  # past Python's int_max_str_digits
            raise LedgerError(what, f"{name} holds an integer of more than "
                                    f"{sys.get_int_max_str_digits():,} digits") from None
        raise LedgerError(what, f"{name} is not valid {fmt}: {clip(str(e))}") from None
    except MemoryError:
        raise LedgerError(what, f"{name} is too large to parse") from None


def read_table(path: str | Path, field: str) -> dict:
    """The file's top-level table (TOML by its suffix, else JSON), or a one-line refusal
    under ``field`` saying what is wrong with it."""
    path = Path(path) if str(path) else path
    toml = str(path).endswith(".toml")
    text = read_text(path, field, "JSON or TOML")
    raw = parse_toml(text, path, field) if toml else parse_json(text, path, field)
    if not isinstance(raw, dict):
        raise LedgerError(field, f"{clip(str(path))} must hold a table of keys, got a "
                                 f"{type(raw).__name__}")
    return raw


def _refuse_constant(path, name: str, field: str):
    raise LedgerError(field, f"{clip(str(path))} holds {name}, which is not a number")


def write_whole(path: str | Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file beside it,
    synced, then renamed over it, so that a reader never sees a part and a failure (a full
    disk, ``ulimit -f``) leaves the previous file as it was; one line says which. A path
    that is not a regular file (``/dev/stdout``, a pipe) is written to directly."""
    name = clip(str(path))
    if str(path) == "":
        raise LedgerError(what, "the path is empty ('')")
    target = os.path.realpath(path)  # a symlink's file is replaced, not the link
    try:
        mode = os.stat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise LedgerError(what, f"cannot write {name}: it is a folder")
        return _write_through(target, text, name, what)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.",
                                   dir=os.path.dirname(target))
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, (mode or 0o666 & ~_umask()) & 0o7777)
        os.replace(tmp, target)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        kept = "the previous file is unchanged" if mode is not None else "nothing written"
        raise LedgerError(what, f"cannot write {name}: {e.strerror or e}; {kept}") from None


def _write_through(target: str, text: str, name: str, what: str) -> None:
    try:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise LedgerError(what, f"cannot write {name}: {e.strerror or e}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
