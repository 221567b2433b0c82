"""Binary units: KiB = 2^10 B, MiB = 2^20 B, GiB = 2^30 B, TiB = 2^40 B."""
from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(b: float, width: int = 0) -> str:
    """``b`` bytes in the largest IEC unit that keeps the number under 1024."""
    for unit in UNITS:
        if abs(b) < 1024 or unit == UNITS[-1]:
            return f"{b:{width}.2f} {unit}"
        b /= 1024
    raise AssertionError("unreachable")
