"""Reading a file a user hands over: its text, or a JSON / TOML table, or one line saying
why not."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ledger.errors import LedgerError


def read_text(path: str | Path, what: str, expected: str = "") -> str:
    """The file's text, or a one-line refusal under ``what``."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LedgerError(what, f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise LedgerError(what, f"{path} is not text" + (f" ({expected} expected)"
                                                          if expected else "")) from None
    except OSError as e:
        raise LedgerError(what, f"cannot read {path}: {e.strerror}") from None


def read_table(path: Path, field: str) -> dict:
    """The file's top-level table (TOML by its suffix, else JSON), or a one-line refusal
    under ``field`` saying what is wrong with it."""
    text = read_text(path, field, "JSON or TOML")
    try:
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(
            text, parse_constant=lambda c: _refuse_constant(path, c, field))
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise LedgerError(field, f"{path} is not valid {path.suffix[1:] or 'JSON'}: {e}") \
            from None
    if not isinstance(raw, dict):
        raise LedgerError(field, f"{path} must hold a table of keys, got a "
                                 f"{type(raw).__name__}")
    return raw


def _refuse_constant(path: Path, name: str, field: str):
    raise LedgerError(field, f"{path} holds {name}, which is not a number")
