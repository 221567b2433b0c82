"""A launch config read from where users keep it: the model and the CLI flags it sets.

``ledger.io.megatron`` and ``ledger.io.torchtitan`` each return one ``Launch``; the
CLI merges ``flags`` (CLI destination names: tp, pp, dp, micro_batch, global_batch ...)
into its own, refusing a flag given differently on both sides, and prints ``notes``
(what was applied with a caveat) as warnings. What the file sets that changes a priced
number the ledger does not model is ``unpriced``: named on one line, and the figures are
marked approximate. ``silent`` (changes nothing priced) and ``applied`` (modelled, under
the ledger's names) are listed with ``--verbose``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import LedgerError
from ledger.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class Launch:
    path: str
    model: ModelSpec
    flags: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()
    silent: tuple[str, ...] = ()
    applied: tuple[str, ...] = ()

    @property
    def approximate(self) -> bool:
        return bool(self.unpriced)


def read_text(path: str, what: str) -> str:
    """The file's text, or a one-line refusal."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LedgerError(what, f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise LedgerError(what, f"{path} is not text") from None
    except OSError as e:
        raise LedgerError(what, f"cannot read {path}: {e.strerror}") from None
