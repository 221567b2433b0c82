"""Run the strategies in one launched world and report rows from every rank."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch._dynamo  # noqa: F401  DDP and FSDP2 load it on first use (~1.5 s of CPU);

# loaded here, before the launcher forks, every rank shares one copy
from ledger.verify.strategies import STRATEGIES


@dataclass
class VerifyReport:
    name: str
    rows: list = field(default_factory=list)
    framing: object = None  # gloo's framing as measured in this world (toys.wire.Framing)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def checks(self):  # the launcher's summary counts these
        return self.rows


@dataclass
class _Ctx:
    rank: int
    world: int
    framing: object  # gloo's framing, measured in this world (ledger.toys.wire)


class Strategy:
    """One strategy as a launcher job: every rank runs it, rank 0 collects the rows.
    The first strategy a process runs measures gloo's framing first (every rank at the
    same point, outside any measurement)."""

    framing = None

    def __init__(self, name: str):
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
        self.name = name

    def run(self, rank):
        import torch.distributed as dist

        from ledger.toys import wire

        if Strategy.framing is None:
            Strategy.framing = wire.measure_framing(rank.rank)
        rows = STRATEGIES[self.name](_Ctx(rank.rank, rank.world, Strategy.framing))
        for r in rows:
            r.rank = rank.rank
            if r.check in ("bytes", "routing") and r.wire_bytes is None:
                raise RuntimeError(f"{r.strategy} {r.collective}: no wire measurement")
        got = [None] * rank.world
        dist.all_gather_object(got, rows)
        if rank.rank:
            return None
        return VerifyReport(self.name, [r for rs in got for r in rs], Strategy.framing)
