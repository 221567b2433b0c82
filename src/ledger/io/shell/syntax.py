"""The syntax of the bash subset ``ledger.io.shell`` reads: words with their quoting kept
(literal, single- and double-quoted, ``$VAR`` / ``${...}``, ``$( )``, ``$(( ))``), arrays,
here-documents, and the statements they make (commands, ``if``, ``while``/``until``,
``for``, ``case``, groups, ``&&``/``||``/``|``)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.errors import LedgerError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_OPS = ("&&", "||", ";;", ";", "|", "&", "(", ")", "\n")


@dataclass
class _Word:
    parts: list  # (kind, value): lit | sq | dq (list of parts) | var | cmd | arith

    @property
    def plain(self) -> str | None:
        """The text of an unquoted literal word, else None."""
        if len(self.parts) == 1 and self.parts[0][0] == "lit":
            return self.parts[0][1]
        return None


@dataclass
class _Cmd:
    words: list
    heredoc: tuple | None = None  # (body, quoted)


@dataclass
class _Heredoc:
    heredoc: tuple  # (delimiter, quoted, strip) until its line ends, then (body, quoted)


@dataclass
class _Array:
    name: str
    append: bool
    words: list


# ---------------------------------------------------------------- lexing
class _Lexer:
    def __init__(self, text: str, path: str):
        self.s, self.i, self.path = text, 0, path
        self.pending: list = []  # here-documents waiting for the end of the line

    def fail(self, what: str):
        line = self.s.count("\n", 0, self.i) + 1
        raise LedgerError("from_megatron", f"{self.path}:{line}: {what}")

    def tokens(self) -> list:
        out = []
        while True:
            tok = self.next()
            if tok is None:
                return out
            out.append(tok)

    def next(self):
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            else:
                break
        if self.i >= len(s):
            return None
        if s[self.i] == "\n":
            self.i += 1
            for target in self.pending:
                target.heredoc = self._heredoc_body(*target.heredoc)
            self.pending = []
            return ("op", "\n")
        if s.startswith("<<", self.i) and not s.startswith("<<<", self.i):
            self.i += 2
            strip = s.startswith("-", self.i)
            self.i += strip
            word = self._target("<<")
            doc = _Heredoc((self._text(word), any(k != "lit" for k, _ in word.parts), strip))
            self.pending.append(doc)
            return ("heredoc", doc)
        m = re.match(r"\d*(>>|>&|<&|&>|>|<)", s[self.i:])
        if m:
            self.i += m.end()
            self._target(m.group(1))  # the redirection's target: dropped
            return ("redir", None)
        for op in _OPS:
            if s.startswith(op, self.i):
                self.i += len(op)
                return ("op", op)
        m = _ASSIGN.match(s, self.i)
        if m and s.startswith("(", m.end()):
            self.i = m.end() + 1
            return ("array", _Array(m.group(1), bool(m.group(2)), self._array_words()))
        return ("word", self.word())

    def _array_words(self) -> list:
        words = []
        while True:
            tok = self.next()
            if tok is None:
                self.fail("unterminated array ( ... )")
            if tok == ("op", ")"):
                return words
            if tok[0] == "word":
                words.append(tok[1])

    @staticmethod
    def _text(word: _Word) -> str:
        out = []
        for kind, v in word.parts:
            out.append("".join(x[1] for x in v) if kind == "dq" else v)
        return "".join(out)

    def _heredoc_body(self, delim: str, quoted: bool, strip: bool):
        lines, s = [], self.s
        while self.i < len(s):
            end = s.find("\n", self.i)
            end = len(s) if end < 0 else end
            line = s[self.i:end]
            self.i = end + 1
            if (line.lstrip("\t") if strip else line) == delim:
                return ("\n".join(lines) + "\n", quoted)
            lines.append(line.lstrip("\t") if strip else line)
        self.fail(f"here-document ends before its delimiter {delim!r}")

    def _target(self, op: str) -> _Word:
        """The word after a redirection or here-document operator; bash refuses none."""
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1
        word = self.word()
        if not word.parts:
            self.fail(f"syntax error: {op!r} with no word after it")
        return word

    def word(self) -> _Word:
        parts, s = [], self.s
        lit = []

        def flush():
            if lit:
                parts.append(("lit", "".join(lit)))
                lit.clear()
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\n;&|()<>":
                break
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                flush()
                parts.append(("sq", s[self.i + 1:self.i + 2]))
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.fail("unterminated single quote")
                flush()
                parts.append(("sq", s[self.i + 1:end]))
                self.i = end + 1
            elif c == '"':
                flush()
                self.i += 1
                parts.append(("dq", self._dquoted()))
            elif c == "$":
                flush()
                parts.append(self._dollar())
            else:
                lit.append(c)
                self.i += 1
        flush()
        return _Word(parts)

    def _dquoted(self) -> list:
        parts, lit, s = [], [], self.s
        while True:
            if self.i >= len(s):
                self.fail("unterminated double quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    lit.append(s[self.i + 1])
                self.i += 2
            elif c == "$":
                if lit:
                    parts.append(("lit", "".join(lit)))
                    lit = []
                parts.append(self._dollar())
            else:
                lit.append(c)
                self.i += 1
        if lit:
            parts.append(("lit", "".join(lit)))
        return parts

    def _dollar(self):
        s = self.s
        if s.startswith("$((", self.i):
            end = self._match(self.i + 3, "((", "))")
            expr, self.i = s[self.i + 3:end], end + 2
            return ("arith", expr)
        if s.startswith("$(", self.i):
            end = self._match(self.i + 2, "(", ")")
            cmd, self.i = s[self.i + 2:end], end + 1
            return ("cmd", cmd)
        if s.startswith("${", self.i):
            end = self._match(self.i + 2, "{", "}")
            expr, self.i = s[self.i + 2:end], end + 1
            return ("var", expr)
        m = _NAME.match(s, self.i + 1) or re.compile(r"[0-9#@*?$!]").match(s, self.i + 1)
        if not m:
            self.i += 1
            return ("lit", "$")
        self.i = m.end()
        return ("var", m.group(0))

    def _match(self, start: int, open_: str, close: str) -> int:
        depth, j, s = 1, start, self.s
        while j < len(s):
            if s.startswith(close, j):
                depth -= 1
                if depth == 0:
                    return j
                j += len(close)
            elif s.startswith(open_, j):
                depth += 1
                j += len(open_)
            elif s[j] == "'" and open_ != "{":
                j = s.find("'", j + 1) + 1 or len(s)
            else:
                j += 1
        self.fail(f"unterminated ${open_}")


# ---------------------------------------------------------------- parsing
def _parse(tokens: list) -> list:
    """Statements: ('cmd', _Cmd) | ('array', _Array) | ('if', [(cond, body)], else) |
    ('while', cond, body, until) | ('for', name, words, body) | ('case', word, arms) |
    ('group', body), each with its connector to the next ('&&', '||' or None)."""
    stmts, _ = _block(tokens, 0, ())
    return stmts


def _block(toks: list, i: int, ends: tuple) -> tuple[list, int]:
    out, conn = [], None
    while i < len(toks):
        kind, v = toks[i]
        if kind == "op" and v in ("\n", ";", "&"):
            i += 1
            continue
        if kind == "word" and v.plain in ends:
            return out, i
        if kind == "op" and v in ends:
            return out, i
        start = i
        stmt, i = _statement(toks, i)
        if i == start:  # a token no statement starts with (a stray ")"): never loop on it
            raise LedgerError("from_megatron", f"unexpected {v if kind == 'op' else kind!r} "
                                               f"in the script")
        nxt = toks[i] if i < len(toks) else None
        conn = nxt[1] if nxt and nxt[0] == "op" and nxt[1] in ("&&", "||", "|") else None
        out.append((stmt, conn))
        if conn:
            i += 1
    if ends:
        raise LedgerError("from_megatron", f"the script ends before {' or '.join(ends)}")
    return out, i


def _expect(toks, i, word):
    if i >= len(toks) or toks[i][0] != "word" or toks[i][1].plain != word:
        raise LedgerError("from_megatron", f"expected {word!r} in the script")
    return i + 1


def _statement(toks: list, i: int):
    kind, v = toks[i]
    head = v.plain if kind == "word" else None
    if head == "if":
        arms, els = [], None
        while True:
            cond, i = _block(toks, i + 1, ("then",))
            body, i = _block(toks, i + 1, ("elif", "else", "fi"))
            arms.append((cond, body))
            word = toks[i][1].plain
            if word == "else":
                els, i = _block(toks, i + 1, ("fi",))
            if word != "elif":
                return ("if", arms, els), i + 1
    if head in ("while", "until"):
        cond, i = _block(toks, i + 1, ("do",))
        body, i = _block(toks, i + 1, ("done",))
        return ("while", cond, body, head == "until"), i + 1
    if head == "for":
        name = toks[i + 1][1].plain
        i += 2
        words = []
        if i < len(toks) and toks[i][0] == "word" and toks[i][1].plain == "in":
            i += 1
            while toks[i][0] == "word":
                words.append(toks[i][1])
                i += 1
        body, i = _block(toks, _expect(toks, _skip_sep(toks, i), "do"), ("done",))
        return ("for", name, words, body), i + 1
    if head == "case":
        return _case(toks, i)
    if head == "{":
        body, i = _block(toks, i + 1, ("}",))
        return ("group", body), i + 1
    if kind == "op" and v == "(":
        body, i = _block(toks, i + 1, (")",))
        return ("group", body), i + 1
    if kind == "array":
        return ("array", v), i + 1
    cmd = _Cmd([])
    while i < len(toks) and toks[i][0] in ("word", "redir", "heredoc", "array"):
        k, val = toks[i]
        if k == "word":
            cmd.words.append(val)
        elif k == "heredoc":
            cmd.heredoc = val.heredoc
        elif k == "array":  # `local X=( ... )` and the like
            cmd.words.append(("array", val))
        i += 1
    return ("cmd", cmd), i


def _skip_sep(toks, i):
    while i < len(toks) and toks[i][0] == "op" and toks[i][1] in ("\n", ";"):
        i += 1
    return i


def _case(toks, i):
    word = toks[i + 1][1]
    i = _expect(toks, _skip_sep(toks, i + 2), "in")
    arms = []
    while True:
        i = _skip_sep(toks, i)
        if toks[i][0] == "word" and toks[i][1].plain == "esac":
            return ("case", word, arms), i + 1
        if toks[i] == ("op", "("):
            i += 1
        pats = []
        while toks[i] != ("op", ")"):
            if toks[i][0] == "word":
                pats.append(toks[i][1])
            i += 1
        body, i = _block(toks, i + 1, (";;", "esac"))
        arms.append((pats, body))
        if toks[i] == ("op", ";;"):
            i += 1


