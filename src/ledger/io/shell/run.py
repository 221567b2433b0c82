"""A launch script read as bash reads it, within reason: the commands it would run.

``commands(text, path, args)`` runs a small bash in Python over the script and returns
every command line it would execute, expanded: variables (``$X``, ``${X:-default}``,
``${X:=v}``, ``${X:+v}``, ``${#X}``), positional arguments, arrays (``X=( ... )``,
``X+=( ... )``, ``"${X[@]}"`` one word per element, unquoted ``${X[@]}`` split again),
``export``/``unset``, quotes, ``\\`` continuations, ``$(( ))`` arithmetic, ``if``/``elif``/
``case``/``while``/``for``, ``&&``/``||``, ``source`` (files beside the script),
``bash -c STRING`` and here-documents fed to ``bash``/``sbatch`` (run as scripts).

What it cannot know it fixes by rule, so a file always reads the same way: the process
environment is never read (unset variables are empty, as in a clean shell); file tests
(``-f``, ``-d``, ``-e``) are true (the paths a script checks are taken to exist); a
positional argument not given expands to the placeholder ``<$N>``; of command
substitutions only ``dirname``, ``basename``, ``readlink -f``, ``realpath``, ``pwd`` and
``echo`` are evaluated, others give an empty string. Nothing is executed. Loops stop after
``MAX_STEPS`` iterations in all, so no script runs unbounded.
"""
from __future__ import annotations

import fnmatch
import operator
import os
from pathlib import Path

from ledger.errors import LedgerError
from ledger.io.files import CAPS, read_text
from ledger.io.shell.expand import _State, _fields, _pattern, _word_fields, bounded
from ledger.io.shell.syntax import _ASSIGN, _Array, _Cmd, _Lexer, _parse, _Word

MAX_STEPS = 10_000  # loop iterations and sourced files, all together


class _Exit(Exception):
    pass


# ---------------------------------------------------------------- running
def _test(st: _State, args: list[str]) -> bool:
    """[ ... ] / [[ ... ]] / test: strings, integers, file tests (true), ! && || -o -a."""
    for op in ("||", "-o"):
        if op in args:
            k = args.index(op)
            return _test(st, args[:k]) or _test(st, args[k + 1:])
    for op in ("&&", "-a"):
        if op in args:
            k = args.index(op)
            return _test(st, args[:k]) and _test(st, args[k + 1:])
    if args[:1] == ["!"]:
        return not _test(st, args[1:])
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        op, x = args
        if op == "-z":
            return x == ""
        if op == "-n":
            return x != ""
        return True  # -f -d -e -x -s -r -w: the paths a script checks are taken to exist
    if len(args) == 3:
        a, op, b = args
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(a, b)
        if op == "!=":
            return not fnmatch.fnmatchcase(a, b)
        ints = {"-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt,
                "-lt": operator.lt, "-ge": operator.ge, "-le": operator.le}
        if op in ints:
            try:
                return ints[op](int(a), int(b))
            except ValueError:
                return False
    return False


def _run(st: _State, stmts: list) -> int:
    status, skip = 0, None
    for stmt, conn in stmts:
        if skip is None or (skip == "&&" and status == 0) or (skip == "||" and status != 0):
            status = _one(st, stmt)
        skip = conn if conn in ("&&", "||") else None
    return status


def _tick(st: _State) -> None:
    st.steps += 1
    if st.steps > MAX_STEPS:
        raise LedgerError("from_megatron", f"{st.path}: more than {MAX_STEPS} loop steps; "
                                           f"the reader stops here")


def _one(st: _State, stmt) -> int:
    kind = stmt[0]
    if kind == "cmd":
        return _command(st, stmt[1])
    if kind == "array":
        _assign_array(st, stmt[1])
        return 0
    if kind == "group":
        return _run(st, stmt[1])
    if kind == "if":
        for cond, body in stmt[1]:
            if _run(st, cond) == 0:
                return _run(st, body)
        return _run(st, stmt[2]) if stmt[2] else 0
    if kind == "while":
        _, cond, body, until = stmt
        while (_run(st, cond) == 0) != until:
            _tick(st)
            _run(st, body)
        return 0
    if kind == "for":
        _, name, words, body = stmt
        for value in (_word_fields(st, words) if words else list(st.args)):
            _tick(st)
            st.vars[name] = value
            _run(st, body)
        return 0
    _, word, arms = stmt  # case
    value = " ".join(_fields(st, word, split=False))
    for pats, body in arms:
        if any(fnmatch.fnmatchcase(value, _pattern(st, pat)) for pat in pats):
            return _run(st, body)
    return 0


def _assign_array(st: _State, arr: _Array) -> None:
    items = (st.arrays.get(arr.name, []) if arr.append else []) + _word_fields(st, arr.words)
    bounded(st, sum(len(x) + 1 for x in items), len(items))
    st.arrays[arr.name] = items
    st.vars.pop(arr.name, None)


def _assign(st: _State, word: _Word) -> str | None:
    """NAME=value / NAME+=value at the head of a command: its NAME if it was one."""
    if not word.parts or word.parts[0][0] != "lit":
        return None
    m = _ASSIGN.match(word.parts[0][1])
    if not m:
        return None
    rest = _Word([("lit", word.parts[0][1][m.end():])] + word.parts[1:])
    value = " ".join(_fields(st, rest, split=False))
    name = m.group(1)
    if m.group(2):
        bounded(st, len(st.vars.get(name) or "") + len(value))
        value = (st.vars.get(name) or "") + value
    st.arrays.pop(name, None)
    st.vars[name] = value
    return name


def _command(st: _State, cmd: _Cmd) -> int:
    words, prefix = list(cmd.words), []  # VAR=v cmd: in cmd's environment
    while words and not isinstance(words[0], tuple) and (name := _assign(st, words[0])):
        prefix.append(name)
        words.pop(0)
    if not words:
        return 0
    if isinstance(words[0], tuple):
        return 0
    argv = []
    for w in words:
        if isinstance(w, tuple):  # declare/local/export X=( ... )
            _assign_array(st, w[1])
        else:
            argv += _fields(st, w)
    if not argv:
        return 0
    name = argv[0]
    if name in ("export", "declare", "local", "readonly", "typeset"):
        for w in words[1:]:
            if not isinstance(w, tuple):
                assigned = _assign(st, w)
                if name == "export" and (assigned or str(w.plain).isidentifier()):
                    st.exported.add(assigned or w.plain)
        return 0
    if name == "unset":
        for n in argv[1:]:
            st.vars.pop(n, None)
            st.arrays.pop(n, None)
            st.exported.discard(n)
        return 0
    if name == "[[":  # no splitting inside; the right of == is a pattern
        body = [" ".join(_fields(st, w, split=False)) for w in words[1:-1]]
        for k, op in enumerate(body[1:-1], 1):
            if op in ("==", "=", "!="):
                body[k + 1] = _pattern(st, words[k + 2])
        return 0 if _test(st, body) else 1
    if name in ("[", "test"):
        body = argv[1:-1] if name == "[" else argv[1:]
        return 0 if _test(st, body) else 1
    if name == "exit":
        raise _Exit
    if name == "shift":
        n = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 1
        st.args = st.args[n:]
        return 0
    if name in ("true", ":"):
        return 0
    if name == "false":
        return 1
    if name in ("source", "."):
        return _source(st, argv[1:])
    if any(os.path.basename(w) == "pretrain_gpt.py" for w in argv):
        st.found.append(argv)
        st.envs.append(_environment(st, prefix, argv))
        return 0
    if name in ("bash", "sh") or (name in ("srun",) and "-c" in argv):
        if "-c" in argv and argv.index("-c") + 1 < len(argv):
            k = argv.index("-c")
            _nested(st, argv[k + 1], argv[k + 2:])
        elif cmd.heredoc:
            _nested(st, _heredoc(st, cmd.heredoc), [])
        return 0
    if name == "sbatch" and cmd.heredoc:
        _nested(st, _heredoc(st, cmd.heredoc), [])
    return 0


def _environment(st: _State, prefix: list[str], argv: list[str]) -> dict[str, str]:
    """What a command's process is handed: the exported variables, those assigned before
    it (``VAR=v torchrun ...``) and those ``env VAR=v`` sets. A name exported with no value
    set (``export NAME`` alone, and not in the script's own environment) is only marked:
    bash hands the child no such variable."""
    env = {n: st.vars[n] for n in sorted(st.exported | set(prefix)) if n in st.vars}
    if argv[0] == "env":
        for w in argv[1:]:
            k, eq, v = w.partition("=")
            if not (eq and k.isidentifier()):
                break
            env[k] = v
    return env


def _heredoc(st: _State, doc: tuple) -> str:
    body, quoted = doc
    if quoted:
        return body
    parts = _Lexer('"' + body.replace('"', '\\"') + '"', st.path).word().parts
    return "".join(_fields(st, _Word(parts), split=False))


def _nested(st: _State, text: str, args: list[str]) -> None:
    _tick(st)
    saved = st.args
    st.args = args
    try:
        _run(st, _parse(_Lexer(text, st.path).tokens()))
    except _Exit:
        pass
    st.args = saved


def _source(st: _State, argv: list[str]) -> int:
    if not argv:
        return 1
    p = Path(argv[0])
    if not p.is_absolute():
        p = Path(st.path).parent / p
    if not p.is_file():
        return 1
    _tick(st)
    text = read_text(p, "from_megatron", cap=max(CAPS["from_megatron"] - st.read, 0))
    st.read += len(text)  # the sourced files together within one launch file's cap
    saved, st.args = st.args, argv[1:] or st.args
    saved_path, st.path = st.path, str(p)
    _run(st, _parse(_Lexer(text, str(p)).tokens()))
    st.args, st.path = saved, saved_path
    return 0


def commands(text: str, path: str, args: tuple[str, ...] = (),
             env: dict[str, str] | None = None) -> tuple[list[list[str]], dict]:
    """The ``pretrain_gpt.py`` command lines the script would run (each as its words, the
    launcher's included), and the variables it ends with. ``env`` holds variables set
    before the script (``TP=8 script.sh``)."""
    st = _run_script(text, path, args, env)
    return st.found, {**st.vars, **{k: " ".join(v) for k, v in st.arrays.items()}}


def launches(text: str, path: str, args: tuple[str, ...] = (),
             env: dict[str, str] | None = None) -> list[tuple[list[str], dict[str, str]]]:
    """Each ``pretrain_gpt.py`` command line with the environment its process gets: what
    the script exports (``env``, set before the script, is in its environment too) and
    what is assigned on the command's own line."""
    st = _run_script(text, path, args, env)
    return list(zip(st.found, st.envs))


def _run_script(text: str, path: str, args, env) -> _State:
    st = _State(path=os.path.abspath(path), args=list(args), vars=dict(env or {}),
                exported=set(env or {}))
    try:
        _run(st, _parse(_Lexer(text, path).tokens()))
    except _Exit:
        pass
    except RecursionError:
        raise LedgerError("from_megatron", f"{path}: nested too deeply to read") from None
    return st
