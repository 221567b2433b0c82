"""Word expansion for the launch-script reader (``ledger.io.shell.run``): ``$X`` and
``${...}`` forms, arrays, quoting and field splitting, ``$(( ))`` arithmetic and the few
command substitutions it evaluates, over the interpreter's ``_State``."""
from __future__ import annotations

import ast
import operator
import os
import re
from dataclasses import dataclass, field

from ledger.errors import LedgerError
from ledger.io.shell.syntax import _Lexer, _Word

MAX_CHARS = 1 << 20  # the longest word, value or array (in characters) a script may build
MAX_ITEMS = 1 << 16  # the most elements of an array, or words of one command
_NOTHING = ("", None)  # what an empty "${X[@]}" contributes: not even an empty word


@dataclass
class _State:
    path: str
    args: list
    vars: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    found: list = field(default_factory=list)
    envs: list = field(default_factory=list)  # each found command's environment
    exported: set = field(default_factory=set)  # names ``export`` marked
    steps: int = 0
    read: int = 0  # characters of sourced files read


# ---------------------------------------------------------------- expansion
def _var(st: _State, expr: str, quoted: bool) -> list:
    """${...} or $NAME as fields-to-be: a list of (text, splittable) segments, with None
    between the elements of a quoted ${X[@]}."""
    m = re.fullmatch(r"#([A-Za-z_]\w*)(\[[@*]\])?", expr)
    if m:
        n = m.group(1)
        return [(str(len(st.arrays.get(n, [])) if m.group(2) else len(_get(st, n))), True)]
    m = re.fullmatch(r"([A-Za-z_]\w*)\[([@*])\]", expr)
    if m:
        items = st.arrays.get(m.group(1), [st.vars[m.group(1)]] if m.group(1) in st.vars
                              else [])
        if quoted and m.group(2) == "@":
            out = []
            for k, item in enumerate(items):
                out += ([None] if k else []) + [(item, False)]
            return out or [_NOTHING]
        return [(" ".join(items), not quoted)]
    m = re.fullmatch(r"([A-Za-z_]\w*|[0-9]+|[@*#?$!])(?:\[(\d+)\])?(?:(:?[-=+?])(.*))?", expr,
                     re.S)
    if not m:
        return [("${" + expr + "}", False)]
    name, index, op, arg = m.groups()
    if name in ("@", "*"):
        if quoted and name == "@":
            out = []
            for k, a in enumerate(st.args):
                out += ([None] if k else []) + [(a, False)]
            return out or [_NOTHING]
        return [(" ".join(st.args), not quoted)]
    value = _get(st, name, index)
    unset = value is None or (op and op.startswith(":") and value == "")
    if op and op.endswith(("-", "=")) and unset:
        value = _expand_text(st, arg)
        if op.endswith("="):
            st.vars[name] = value
    elif op and op.endswith("+"):
        value = "" if unset else _expand_text(st, arg)
    if value is None:
        value = f"<${name}>" if name.isdigit() and name != "0" else ""
    return [(value, not quoted)]


def _get(st: _State, name: str, index: str | None = None) -> str | None:
    if name.isdigit():
        n = int(name)
        return st.path if n == 0 else (st.args[n - 1] if n <= len(st.args) else None)
    if name == "#":
        return str(len(st.args))
    if name in ("?", "$", "!"):
        return "0"
    if name in st.arrays:
        items = st.arrays[name]
        k = int(index or 0)
        return items[k] if k < len(items) else None
    return st.vars.get(name)


def _expand_text(st: _State, text: str) -> str:
    """A ${X:-word} default: the word expanded, quotes removed, no splitting."""
    lexer = _Lexer(text, st.path)
    return " ".join(_fields(st, lexer.word(), split=False))


def _pattern(st: _State, word: _Word) -> str:
    """A [[ == ]] / case pattern: glob characters active where unquoted."""
    out = []
    for kind, v in word.parts:
        text = "".join(_fields(st, _Word([(kind, v)]), split=False))
        out.append(text if kind in ("lit", "var") else re.sub(r"([*?\[])", r"[\1]", text))
    return "".join(out)


def bounded(st: _State, chars: int, items: int = 0) -> None:
    """Refuse a word, a value or an array past ``MAX_CHARS`` characters or ``MAX_ITEMS``
    elements, before it grows further (``X=$X$X`` repeated, arrays doubled)."""
    if chars > MAX_CHARS or items > MAX_ITEMS:
        raise LedgerError("from_megatron", f"{st.path}: a value grows past "
                                           f"{MAX_CHARS:,} characters or {MAX_ITEMS:,} "
                                           f"words; the reader stops here")


def _segments(st: _State, parts: list, quoted: bool = False) -> list:
    out, chars = [], 0
    for kind, v in parts:
        if kind in ("lit", "sq"):
            new = [(v, False)]
        elif kind == "dq":
            new = _segments(st, v, quoted=True) if v else [("", False)]
        elif kind == "var":
            new = _var(st, v, quoted)
        elif kind == "arith":
            new = [(str(_arith(st, v)), not quoted)]
        elif kind == "cmd":
            new = [(_substitute(st, v), not quoted)]
        else:
            continue
        chars += sum(len(seg[0]) + 1 for seg in new if seg is not None)
        out += new
        bounded(st, chars, len(out))
    return out


def _fields(st: _State, word: _Word, split: bool = True) -> list[str]:
    fields, cur, started = [], [], False
    for seg in _segments(st, word.parts):
        if seg is None:  # between the elements of "${X[@]}"
            fields.append("".join(cur))
            cur, started = [], False
            continue
        text, splittable = seg
        if splittable is None:  # an empty "${X[@]}": no word at all
            continue
        if not (splittable and split):
            cur.append(text)
            started = True
            continue
        for ch in text:
            if ch in " \t\n":
                if started:
                    fields.append("".join(cur))
                cur, started = [], False
            else:
                cur.append(ch)
                started = True
    if started:
        fields.append("".join(cur))
    return fields


def _word_fields(st: _State, words: list) -> list[str]:
    out, chars = [], 0
    for w in words:
        new = _fields(st, w)
        chars += sum(len(f) + 1 for f in new)
        out += new
        bounded(st, chars, len(out))
    return out


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod}


def _arith(st: _State, expr: str) -> int:
    """$(( )) over integers: + - * / % and parentheses; names are variables (0 if unset)."""
    text = re.sub(r"\$\{?([A-Za-z_]\w*|\d+)\}?|([A-Za-z_]\w*)",
                  lambda m: _get(st, m.group(1) or m.group(2)) or "0", expr.replace('"', ""))

    def ev(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            right = ev(n.right)
            if isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
                raise ValueError
            return _wrap(_ARITH[type(n.op)](ev(n.left), right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return _wrap(-ev(n.operand))
        raise ValueError
    try:
        return ev(ast.parse(text.strip() or "0", mode="eval").body)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise LedgerError("from_megatron", f"{st.path}: $(( {expr} )) is not integer "
                                           f"arithmetic") from None


def _wrap(n: int) -> int:
    """bash's arithmetic: signed 64-bit, wrapping (so no number grows without bound)."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


def _substitute(st: _State, cmd: str) -> str:
    words = _word_fields(st, [w for k, w in _Lexer(cmd, st.path).tokens() if k == "word"])
    if not words:
        return ""
    name, rest = words[0], [w for w in words[1:] if not w.startswith("-")]
    if name == "dirname" and rest:
        return os.path.dirname(rest[0]) or "."
    if name == "basename" and rest:
        return os.path.basename(rest[0])
    if name in ("readlink", "realpath") and rest:
        return os.path.abspath(rest[0])
    if name == "pwd":
        return os.getcwd()
    if name == "echo":
        return " ".join(words[1:])
    return ""
