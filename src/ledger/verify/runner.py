"""Run the strategies in one launched world and report rows from every rank."""
from __future__ import annotations

from dataclasses import dataclass, field

from ledger.verify.strategies import STRATEGIES


@dataclass
class VerifyReport:
    name: str
    rows: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def checks(self):  # the launcher's summary counts these
        return self.rows


class Strategy:
    """One strategy as a launcher job: every rank runs it, rank 0 collects the rows."""

    def __init__(self, name: str):
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
        self.name = name

    def run(self, ctx):
        rows = STRATEGIES[self.name](ctx)
        for r in rows:
            r.rank = ctx.rank
        got = ctx.gather(rows)
        return None if got is None else VerifyReport(self.name, [r for rs in got for r in rs])
