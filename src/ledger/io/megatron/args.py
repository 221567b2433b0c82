"""Megatron-LM's command line read as its argparse parser reads it, from the table of every
flag ``pretrain_gpt.py`` accepts (``data/megatron_arguments.json``, generated from
megatron/training/arguments.py at the commit it names by ``tools/megatron_arguments.py``).

The table says, per flag, whether it takes a value (a switch never does), how many
(``nargs``), its type, choices, ``dest`` and default. ``parse`` follows argparse with
``allow_abbrev=False`` (arguments.py:119-120): exact flag names, ``--flag=value``, a later
occurrence replacing an earlier one, a word starting with ``-`` (but not a negative number)
ending a flag's values. Values are converted by the flag's own type; Megatron's
``moe_freq_type`` list patterns (``'[0]*3+[1]*58'``) are evaluated by a small evaluator of
integer lists, ``+`` and ``*`` (Megatron's ``_eval_pattern``, arguments.py:245-253, allows
those characters only and then calls ``eval``; this never does).

>>> p = parse(["--num-layers", "4", "--swiglu", "--moe-layer-freq", "[0]+[1]*3"], "x.sh")
>>> p.values["num_layers"], p.values["swiglu"], p.values["moe_layer_freq"]
(4, True, [0, 1, 1, 1])
>>> namespace(p)["make_vocab_size_divisible_by"]   # Megatron's default
128
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from ledger.errors import clip
from ledger.io.limits import MAX_LAYERS

_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher


@cache
def table() -> dict:
    """The flag table: {"commit": ..., "flags": {flag: {takes_value, action, type, default,
    dest, nargs, choices, const, line, group, source}}}."""
    text = resources.files("ledger.io").joinpath("data/megatron_arguments.json").read_text()
    return json.loads(text)


@dataclass
class Parsed:
    """What the parser made of a command line: each given flag's value by dest, the flags
    as given (flag -> its words, last occurrence), and what argparse would reject."""

    values: dict = field(default_factory=dict)
    given: dict = field(default_factory=dict)  # flag -> tuple of its value words
    unknown: list = field(default_factory=list)  # unrecognized arguments
    bad: list = field(default_factory=list)  # (flag, message): a value argparse rejects
    no_value: list = field(default_factory=list)  # flags that needed a value and got none


def _is_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _NUMBER.match(word)


def _count(nargs) -> tuple[int, int | None]:
    """(least, most) values a flag takes."""
    if nargs is None:
        return 1, 1
    if isinstance(nargs, int) or str(nargs).isdigit():
        return int(nargs), int(nargs)
    return {"?": (0, 1), "*": (0, None), "+": (1, None)}[nargs]


def parse(words: list[str], path: str) -> Parsed:
    flags, out, i = table()["flags"], Parsed(), 0
    while i < len(words):
        word = words[i]
        i += 1
        if not _is_flag(word):
            out.unknown.append(word)
            continue
        name, eq, inline = word.partition("=")
        spec = flags.get(name)
        if spec is None:
            out.unknown.append(name)
            continue
        if not spec["takes_value"]:
            if eq:
                out.bad.append((name, f"{name} is a switch and takes no value, got {word!r}"))
                continue
            out.values[spec["dest"]] = _switch(name, spec)
            out.given[name] = ()
            continue
        least, most = _count(spec.get("nargs"))
        if eq:
            taken = [inline]
        else:
            taken = []
            while i < len(words) and not _is_flag(words[i]) and (most is None or
                                                                 len(taken) < most):
                taken.append(words[i])
                i += 1
        if len(taken) < least:
            out.no_value.append(name)
            continue
        try:
            value = [convert(name, spec, w) for w in taken]
        except ValueError as e:
            out.bad.append((name, str(e)))
            continue
        out.values[spec["dest"]] = value if spec.get("nargs") not in (None, "?") else \
            (value[0] if value else spec.get("const"))
        out.given[name] = tuple(taken)
    return out


def _switch(name: str, spec: dict):
    action = spec["action"]
    if action == "store_true":
        return True
    if action == "store_false":
        return False
    if action.endswith("BooleanOptionalAction"):
        return not name.startswith("--no-")
    return spec.get("const")


def convert(name: str, spec: dict, text: str):
    """One value by the flag's type, checked against its choices."""
    kind = spec.get("type") or "str"
    try:
        if kind == "int":
            value = int(text)
        elif kind == "float":
            value = float(text)
        elif kind == "bool":  # argparse's type=bool: any non-empty string is True
            value = bool(text)
        elif kind in ("moe_freq_type", "no_rope_freq_type", "la_freq_type"):
            value = layer_pattern(text) if "[" in text else int(text)
        elif kind == "tuple_type":
            value = tuple(int(x) for x in text.strip("()").split(","))
        else:
            value = text
    except ValueError:
        raise ValueError(f"{name}: invalid {kind} value: {clip(repr(text))}") from None
    choices = spec.get("choices")
    if choices and value not in choices:
        raise ValueError(f"{name}: invalid choice: {text!r} (choose from "
                         f"{', '.join(map(str, choices))})")
    return value


def layer_pattern(text: str) -> list[int]:
    """A Megatron layer pattern such as ``'[0]*3+[1]*58'`` or ``'([0,1]*24)'``: integer
    lists joined by ``+`` and repeated by ``*``, at most ``MAX_LAYERS`` entries.

    >>> layer_pattern("([0]+[1]*2)*2")
    [0, 1, 1, 0, 1, 1]
    """
    if re.search(r"[^,\d\[\]()+*\s]", text):  # the characters _eval_pattern allows
        raise ValueError(text)
    try:  # Python's own eval (Megatron's) stops at the same depth: joined terms by the
        tree = ast.parse(text.strip(), mode="eval").body  # thousand are nested as deep
        value = _pattern(tree)
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError(text) from None
    if not isinstance(value, list):
        raise ValueError(text)
    return value


def _pattern(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_pattern(e) for e in node.elts]
        if any(not isinstance(x, int) for x in items):
            raise ValueError("nested lists")
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        a, b = _pattern(node.left), _pattern(node.right)
        if isinstance(node.op, ast.Add):
            if type(a) is not type(b):
                raise ValueError("adds a list and a number")
            out = a + b
        elif isinstance(a, int) and isinstance(b, int):
            out = a * b
        else:
            seq, n = (a, b) if isinstance(b, int) else (b, a)
            if not isinstance(n, int) or n * len(seq) > MAX_LAYERS:
                raise ValueError("too long")
            out = seq * n
        if not isinstance(out, int) and len(out) > MAX_LAYERS:
            raise ValueError("too long")
        if isinstance(out, int) and abs(out) > MAX_LAYERS:
            raise ValueError("too large")
        return out
    raise ValueError("not a layer pattern")


def namespace(parsed: Parsed) -> dict:
    """Every dest at Megatron's default (literal defaults; computed ones are None), with
    the parsed values over them: what ``args`` holds before validate_args."""
    ns = {}
    for spec in table()["flags"].values():
        default = spec.get("default")
        ns.setdefault(spec["dest"], None if isinstance(default, str) and
                      default.startswith("expr:") else default)
    return ns | parsed.values
