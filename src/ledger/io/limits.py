"""The boundary: every number a user types is checked here once, against a stated limit.

The parser uses the ``count``/``natural``/``real`` types below, so a bad flag is refused
while parsing with its name and the number (``tp: must be an integer in 1..1,048,576,
got '0'``); nothing non-finite, non-positive or absurd reaches the formulas. The limits
are far beyond any run anyone has made, and exist so that no command's work or output
grows without bound.

>>> count(8)("4")
4
>>> count(8)("9")
Traceback (most recent call last):
argparse.ArgumentTypeError: must be an integer in 1..8, got '9'
>>> real(1.0)("nan")
Traceback (most recent call last):
argparse.ArgumentTypeError: must be a finite number in (0, 1], got 'nan'
"""
from __future__ import annotations

import argparse
import math

from ledger.errors import LedgerError, clip

# A world of 2^20 = 1,048,576 GPUs: several times the largest cluster announced to date.
MAX_GPUS = 1 << 20
MAX_GPUS_PER_NODE = 1024
MAX_GPUS_PER_DOMAIN = 1 << 16  # an NVLink domain of whole nodes (NVL72: 72)
MAX_MICROBATCHES = 1 << 30  # per step per pipeline (priced in closed form past the simulator)
MAX_MICRO_BATCH = 1 << 16  # sequences per micro-batch
MAX_GLOBAL_BATCH = 1 << 36  # sequences per step
MAX_VP = 1024  # virtual stages per PP rank
MAX_MODEL_SIZE = 1 << 24  # any count in a model's shape: layers, widths, vocab, tokens
MAX_LAYERS = 1 << 16  # some work is per layer (its kind: MoE? windowed?)
MAX_MODEL_REAL = 1e9  # a model's real-valued knobs (soft-caps) are finite and below this
MAX_CAPACITY_FACTOR = 64.0  # routed tokens padded to at most 64x their even share
MAX_TOP = 10_000  # plans listed
MAX_HEADROOM_GIB = 1 << 20  # planner's memory headroom
MAX_GPU_MEMORY_GIB = 1 << 20  # a GPU's memory, --gpu-memory
MAX_DROPOUT = 0.999  # a dropout probability below 1
MAX_TIME = 1e6  # schedule times, in whatever unit the user chose
MIN_TIME = 1e-6
# A whole run: a quadrillion tokens is 60x the largest published pre-training (15.6T);
# the other figures are bounded far past any cluster or price seen.
MAX_TOKENS = 1e15
MAX_STEPS = 1 << 40  # optimizer steps of one phase
MAX_PRICE = 1e4  # USD per GPU-hour
MAX_PUE = 10.0  # facility / IT energy (1.0 is the floor: no facility overhead)
MAX_STORAGE_GBPS = 1e6  # checkpoint storage, GB/s (a petabyte per second)
MIN_STORAGE_GBPS = 1e-3  # a megabyte per second: slower is not storage a run could use
MAX_MTBF_HOURS = 1e9  # per-GPU hours between interruptions
MAX_RELAUNCH_MIN = 1e5  # minutes to relaunch a job after an interruption


def integer(low: int, limit: int, name: str = "integer"):
    """argparse type: an integer in low..limit."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or not low <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{limit:,}, "
                                             f"got {clip(repr(text))}")
        return value
    parse.__name__ = name
    return parse


def count(limit: int):
    """argparse type: an integer in 1..limit (a size)."""
    return integer(1, limit, "count")


def natural(limit: int):
    """argparse type: an integer in 0..limit."""
    return integer(0, limit, "natural")


def real(limit: float, low: float = 0.0, closed_low: bool = False):
    """argparse type: a finite float in (low, limit] (or [low, limit] when ``closed_low``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above = value >= low if closed_low else value > low
        if not (math.isfinite(value) and above and value <= limit):
            span = f"{'[' if closed_low else '('}{low:g}, {limit:g}]"
            raise argparse.ArgumentTypeError(f"must be a finite number in {span}, got "
                                             f"{clip(repr(text))}")
        return value
    parse.__name__ = "real"
    return parse


def model_flag(typ):
    """argparse type for a model flag of Python type ``typ`` (int or float), bounded; the
    signs and relations of the fields are ModelSpec's to check."""
    if typ is int:
        return natural(MAX_MODEL_SIZE)
    if typ is float:
        return real(MAX_MODEL_REAL, -MAX_MODEL_REAL, closed_low=True)
    return typ


def check_model_size(model) -> None:
    """A model from any source (preset, config.json, flags, launch file) within the limits."""
    limits = {"layers": MAX_LAYERS, "hidden": MAX_MODEL_SIZE, "ffn_hidden": MAX_MODEL_SIZE,
              "vocab": MAX_MODEL_SIZE, "seq_len": MAX_MODEL_SIZE, "heads": MAX_MODEL_SIZE,
              "num_experts": MAX_MODEL_SIZE}
    for name, limit in limits.items():
        value = getattr(model, name)
        if value > limit:
            raise LedgerError(name, f"{name}({value:,}) exceeds the limit of {limit:,}")


def check_world(**sizes: int) -> int:
    """The product of the axis sizes, refused past MAX_GPUS with every factor shown."""
    world = math.prod(sizes.values())
    if world > MAX_GPUS:
        shown = " * ".join(f"{k}({v})" for k, v in sizes.items())
        raise LedgerError("gpus", f"{shown} = {world:,} GPUs exceeds the limit of "
                                  f"{MAX_GPUS:,}")
    return world


def check_finite_json(obj, where: str = "output") -> None:
    """Refuse to print JSON holding NaN or Infinity (not JSON); names the first key."""
    if isinstance(obj, float) and not math.isfinite(obj):
        raise LedgerError(where, f"is {obj}: the inputs overflow the model's arithmetic")
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_finite_json(v, f"{where}.{k}" if where != "output" else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_finite_json(v, f"{where}[{i}]")


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one LedgerError (one line, exit status 2)
    instead of usage + error; an error in one argument is reported under its name.
    Flags are matched whole (``allow_abbrev=False``, as Megatron-LM's parser,
    arguments.py:119-120): ``--gpus`` is never read as ``--gpus-per-node``; a flag the
    command does not take is named with the command's own flags."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:  # noqa: D102
        if self.usage is None and len(self._actions) > 30:  # the flags are listed below it
            pos = " ".join(f"[{a.dest}]" for a in self._actions if not a.option_strings)
            self.usage = f"%(prog)s {pos} [flags]".replace("  ", " ")
        return super().format_help()

    def parse_args(self, args=None, namespace=None):  # noqa: D102
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            raise LedgerError("usage", self._command(ns).unknown(extras))
        return ns

    def _command(self, ns) -> "OneLineParser":
        """The sub-command's parser that read ``ns`` (or this one)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(ns, action.dest, None), self)
        return self

    def own_flags(self) -> list[str]:
        return [o for a in self._actions for o in a.option_strings
                if o.startswith("--") and o not in ("--help", "--version")]

    def unknown(self, extras: list[str]) -> str:
        """One line: the first argument the command does not take, and its flags."""
        import difflib

        word = extras[0]
        if not word.startswith("-"):
            return f"{self.prog} takes no argument {clip(repr(word), 100)} here"
        flag, own = word.split("=")[0], self.own_flags()
        close = list(dict.fromkeys([o for o in own if o.startswith(flag)] +
                                   difflib.get_close_matches(flag, own, n=3, cutoff=0.75)))[:3]
        hint = f" (closest: {', '.join(close)})" if close else ""
        return f"{self.prog} does not take {clip(flag, 100)}{hint}; its flags: {' '.join(own)}"

    def error(self, message: str):  # noqa: D102
        if message.startswith("unrecognized arguments: "):
            raise LedgerError("usage", self.unknown(message.split(": ", 1)[1].split()))
        if message.startswith("argument ") and ": " in message:
            flags, _, rest = message[len("argument "):].partition(": ")
            field = flags.split("/")[0].lstrip("-").replace("-", "_")
            raise LedgerError(field, f"{clip(rest, 400)} ({self.prog} {flags.split('/')[0]})")
        raise LedgerError("usage", f"{self.prog}: {clip(message, 400)}")
