"""One verify row: the ledger's figure next to what was handed to the collective and
what the kernel saw leave this rank; every row with a figure can fail.

Two comparisons per byte row:

- payload: the ring bytes of what was handed to the collective (``coll_bytes`` of the
  dispatcher's tensors) against the ledger's prediction - sizes and call counts;
- wire: the bytes this rank's TCP sockets wrote during the collectives, from the kernel
  (``ledger.toys.wire``), minus gloo's measured framing for the messages gloo's algorithm
  sends, against the ledger's prediction - the 2(n-1)/n or (n-1)/n factor itself. Where
  gloo's algorithm is not the ring the ledger prices (``GLOO_VS_RING``), the row says so
  and the wire is held to gloo's own figure, the ledger's times that factor.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.placement import coll_bytes

WIRE_TOLERANCE = 0.01  # framing is subtracted, so what is left is segment rounding
# gloo's wire bytes / the ring's for the same payload (ledger.toys.gloo explains why)
GLOO_VS_RING = {"reduce_scatter": 2.0}
GLOO_NOTES = {"reduce_scatter": "gloo runs a reduce-scatter as an all-reduce of the whole "
                                "input: its wire carries 2(n-1)/n x S, twice the ledger's "
                                "ring; the wire is held to that gloo figure"}


@dataclass
class Row:
    check: str  # "bytes" | "state" | "routing" | "activations"
    strategy: str
    collective: str
    predicted_bytes: float
    measured_bytes: float
    tolerance: float = 0.0
    note: str = ""
    rank: int = 0
    wire_bytes: float | None = None  # kernel bytes minus framing
    wire_expected: float | None = None  # ledger's figure, or gloo's where it differs
    gloo_bytes: float | None = None  # gloo's own figure when its algorithm differs
    framing_bytes: float | None = None  # what was subtracted
    wire_tolerance: float = WIRE_TOLERANCE

    @property
    def ratio(self) -> float:
        return self.measured_bytes / self.predicted_bytes if self.predicted_bytes else 1.0

    @property
    def wire_ratio(self) -> float | None:
        """wire / expected; None without a wire figure, or where none was expected (then
        ``wire_ok`` asks for no bytes at all)."""
        if self.wire_bytes is None or not self.wire_expected:
            return None
        return self.wire_bytes / self.wire_expected

    @property
    def payload_ok(self) -> bool:
        if not self.predicted_bytes:
            return not self.measured_bytes
        return abs(self.ratio - 1.0) <= self.tolerance + 1e-12

    @property
    def wire_ok(self) -> bool:
        if self.wire_bytes is None:
            return True  # no wire here (the fake process group); the runner insists on one
        if not self.wire_expected:
            return abs(self.wire_bytes) < 1.0
        return abs(self.wire_ratio - 1.0) <= self.wire_tolerance + 1e-12

    @property
    def ok(self) -> bool:
        return self.payload_ok and self.wire_ok


def bytes_rows(name, meter, comms, notes=None, framing=None, tolerance=0.0) -> list[Row]:
    """One row per collective kind: the ledger's ``comms`` against ``meter``'s records.
    With ``framing`` (gloo's, measured) the wire columns are filled from the kernel."""
    predicted: dict[str, float] = {}
    for c in comms:
        predicted[c.kind] = predicted.get(c.kind, 0.0) + float(c.bytes)
    seen = {r.kind for r in meter.records} - {"recv"}
    kinds = sorted(set(predicted) | seen)
    notes = {k: v for k, v in (notes or {}).items() if v}
    rows = []
    for k in kinds:
        handed = sum(coll_bytes(r.kind, r.n, r.payload) for r in meter.records
                     if r.kind == k)
        row = Row("bytes", name, k, predicted.get(k, 0.0), handed, tolerance,
                  "; ".join(x for x in (GLOO_NOTES.get(k) if framing else "", notes.get(k))
                            if x))
        if framing is not None:
            fill_wire(row, meter, k, framing, predicted.get(k, 0.0) * GLOO_VS_RING.get(k, 1.0))
            if k in GLOO_VS_RING:
                row.gloo_bytes = row.wire_expected
        rows.append(row)
    return [r for r in rows if r.predicted_bytes or r.measured_bytes]


def fill_wire(row: Row, meter, kind: str, framing, expected: float) -> None:
    traffic = meter.traffic(kind)
    row.framing_bytes = framing.of(traffic.sends, traffic.recvs)
    row.wire_bytes = meter.kernel_bytes(kind) - row.framing_bytes
    row.wire_expected = expected
