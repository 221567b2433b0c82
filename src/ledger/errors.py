"""The one exception the analytic core raises for input it refuses.

Every refusal names the field that is wrong and shows the numbers, so a user
can fix the config from the message alone; the CLI turns it into one line on
stderr and exit status 2.
"""
from __future__ import annotations


class LedgerError(ValueError):
    """A refused input. ``field`` names what was wrong; ``str()`` is one line."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


def require_positive(field: str, value: object) -> None:
    """Refuse anything but a positive integer (bools are not sizes)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LedgerError(field, f"must be a positive integer, got {value!r}")


def require_divides(field: str, value: int, divisor_name: str, divisor: int) -> None:
    """Refuse ``value`` unless ``divisor`` divides it, echoing both numbers."""
    if value % divisor:
        raise LedgerError(
            field, f"{field}({value}) is not divisible by {divisor_name}({divisor})"
        )


CLIP_CHARS = 200  # the most of a value a one-line message echoes


def clip(value: object, limit: int = CLIP_CHARS) -> str:
    """``repr``-free text of ``value`` cut to ``limit`` characters with an ellipsis, and
    terminal control characters shown escaped, so that a message stays one short line.

    >>> clip("x" * 300)[-4:], len(clip("x" * 300))
    ('xxx…', 200)
    >>> clip("a\\x1b[2Jb")
    'a\\\\x1b[2Jb'
    """
    text = str(value)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)
