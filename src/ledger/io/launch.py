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

from ledger.io.files import read_text
from ledger.model import ModelSpec

__all__ = ["Launch", "read_text"]


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
