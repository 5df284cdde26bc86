"""A small reader of the protobuf *text* format, without a protobuf dependency.

It knows only the syntax, not any schema: the result is a tree of ordered entries
``(name, value, line, col)``, where a value is either a :class:`Scalar` (the token as written,
with its kind) or a nested :class:`Message`. Interpreting a scalar (is ``33000`` an int64 or a
float?) is the job of the schema-aware caller (:mod:`dfsearch.io.dfmodel`).

Supported syntax: messages ``name { ... }``, ``name: { ... }`` and ``name < ... >``; scalar
fields ``name: value``; lists ``name: [v1, v2]`` (expanded into repeated entries); integers
(decimal, hexadecimal ``0x..``), floats (``1.``, ``.5``, ``1e-3``, ``2.5f``), ``inf``/``nan``
identifiers, single- or double-quoted strings with C escapes (adjacent strings concatenate),
identifiers (enum values, ``true``/``false``), ``#`` comments, optional ``;`` or ``,``
separators. Lines and columns are 1-based; a tab counts as one column.

Every syntax error raises :class:`~dfsearch.errors.SpecError` with a message such as
``line 12, column 1: expected '}' to close 'kernels' (opened at line 3, column 1); found end of
input`` — never a Python traceback.

>>> msg = parse_pbtxt('system { num_chip: 4  # four chips\\n}')
>>> entry = msg.entries[0]
>>> entry.name, entry.line, entry.col
('system', 1, 1)
>>> sub = entry.value.entries[0]
>>> sub.name, sub.value.kind, sub.value.text
('num_chip', 'int', '4')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dfsearch.errors import Issue, SpecError

__all__ = ["Scalar", "Entry", "Message", "parse_pbtxt"]


@dataclass(frozen=True, slots=True)
class Scalar:
    """One scalar value as written.

    ``kind`` is ``"int"`` (decimal or hex integer literal, maybe negative), ``"float"`` (a
    numeric literal with a point, an exponent or an ``f`` suffix; the suffix is removed from
    ``text``), ``"ident"`` (an identifier such as ``N_TILING``, ``true`` or ``-inf``) or
    ``"string"`` (``text`` is the decoded content, without quotes).
    """

    kind: str
    text: str
    line: int
    col: int

    def show(self, limit: int = 40) -> str:
        """The value as a user would recognise it in an error message (long ones shortened)."""
        text = self.text if len(self.text) <= limit else self.text[: limit - 3] + "..."
        return repr(text) if self.kind == "string" else text


@dataclass(frozen=True, slots=True)
class Entry:
    """One field occurrence: ``name``, its value and where the name starts."""

    name: str
    value: Scalar | Message
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class Message:
    """An ordered sequence of entries; ``line``/``col`` locate the opening bracket (1, 1 for the
    whole document)."""

    entries: tuple[Entry, ...]
    line: int = 1
    col: int = 1

    def names(self) -> tuple[str, ...]:
        """Field names in order of appearance (with repeats)."""
        return tuple(e.name for e in self.entries)

    def get(self, name: str) -> list[Entry]:
        """Every entry called ``name``, in order."""
        return [e for e in self.entries if e.name == name]


# --------------------------------------------------------------------------- tokenizer
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(
    r"""
    (?P<hex>0[xX][0-9A-Fa-f]+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)(?P<suffix>[fF])?
    """,
    re.VERBOSE,
)
_WORD_CHAR = re.compile(r"[A-Za-z0-9_.]")
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_SYMBOLS = "{}<>:;,[]"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident" | "int" | "float" | "string" | "sym" | "eof"
    text: str
    line: int
    col: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        if self.kind == "string":
            return f"string {self.text!r}"
        return f"'{self.text}'"


class _SyntaxError(Exception):
    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.col = col
        self.message = message


class _Lexer:
    """Turns text into tokens, tracking 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self._peeked: _Token | None = None

    # -- position helpers
    @property
    def col(self) -> int:
        return self.pos - self.line_start + 1

    def _advance(self, n: int) -> None:
        end = self.pos + n
        chunk = self.text[self.pos : end]
        newlines = chunk.count("\n")
        if newlines:
            self.line += newlines
            self.line_start = self.pos + chunk.rindex("\n") + 1
        self.pos = end

    def _skip_space_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r\n\f\v":
                self._advance(1)
            elif ch == "#":
                end = text.find("\n", self.pos)
                self._advance((len(text) if end < 0 else end) - self.pos)
            else:
                return

    # -- public
    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self._read()
        return self._peeked

    def next(self) -> _Token:
        tok = self.peek()
        self._peeked = None
        return tok

    # -- reading
    def _read(self) -> _Token:
        self._skip_space_and_comments()
        line, col = self.line, self.col
        if self.pos >= len(self.text):
            return _Token("eof", "", line, col)
        ch = self.text[self.pos]
        if ch in _SYMBOLS:
            self._advance(1)
            return _Token("sym", ch, line, col)
        if ch in "\"'":
            return self._read_strings(line, col)
        if ch == "-" or ch == "+":
            nxt = self.text[self.pos + 1 : self.pos + 2]
            if nxt.isdigit() or nxt == ".":
                return self._read_number(line, col, sign=ch)
            if nxt and (nxt.isalpha() or nxt == "_"):
                m = _IDENT.match(self.text, self.pos + 1)
                assert m is not None
                word = m.group(0)
                self._advance(1 + len(word))
                return _Token("ident", ("-" if ch == "-" else "") + word, line, col)
            raise _SyntaxError(line, col, f"unexpected character {ch!r}")
        if ch.isdigit() or (ch == "." and self.text[self.pos + 1 : self.pos + 2].isdigit()):
            return self._read_number(line, col, sign="")
        m = _IDENT.match(self.text, self.pos)
        if m:
            self._advance(len(m.group(0)))
            return _Token("ident", m.group(0), line, col)
        raise _SyntaxError(line, col, f"unexpected character {ch!r}")

    def _read_number(self, line: int, col: int, sign: str) -> _Token:
        start = self.pos + len(sign)
        m = _NUMBER.match(self.text, start)
        if m is None:  # pragma: no cover - guarded by the caller
            raise _SyntaxError(line, col, "invalid number")
        end = m.end()
        tail = _WORD_CHAR.match(self.text, end)
        if tail is not None:
            # e.g. "12abc", "1.2.3", "0x1g": take the whole run for the message
            run = re.match(r"[A-Za-z0-9_.+-]*", self.text[end:])
            bad = self.text[self.pos : end + (run.end() if run else 0)]
            raise _SyntaxError(line, col, f"invalid number {bad!r}")
        sign_text = "-" if sign == "-" else ""
        if m.group("hex"):
            self._advance(end - self.pos)
            return _Token("int", sign_text + m.group("hex"), line, col)
        num = m.group("num")
        self._advance(end - self.pos)
        is_float = bool(m.group("suffix")) or any(c in num for c in ".eE")
        if not is_float and len(num) > 1 and num.startswith("0"):
            raise _SyntaxError(
                line,
                col,
                f"ambiguous integer {sign_text + num!r}: the protobuf text format reads a "
                "leading 0 as octal; write it without leading zeros",
            )
        return _Token("float" if is_float else "int", sign_text + num, line, col)

    def _read_strings(self, line: int, col: int) -> _Token:
        """One or more adjacent quoted strings, concatenated."""
        parts = [self._read_one_string()]
        while True:
            save = (self.pos, self.line, self.line_start)
            self._skip_space_and_comments()
            if self.pos < len(self.text) and self.text[self.pos] in "\"'":
                parts.append(self._read_one_string())
            else:
                self.pos, self.line, self.line_start = save
                break
        return _Token("string", "".join(parts), line, col)

    def _read_one_string(self) -> str:
        text = self.text
        quote = text[self.pos]
        line, col = self.line, self.col
        i = self.pos + 1
        out: list[str] = []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise _SyntaxError(line, col, f"unterminated string (missing closing {quote})")
            ch = text[i]
            if ch == quote:
                i += 1
                break
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            # escape sequence
            esc_col = col + (i - self.pos)
            nxt = text[i + 1 : i + 2]
            if nxt in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[nxt])
                i += 2
            elif nxt and nxt in "01234567":
                m = re.match(r"[0-7]{1,3}", text[i + 1 :])
                assert m is not None
                out.append(chr(int(m.group(0), 8)))
                i += 1 + m.end()
            elif nxt in ("x", "X"):
                m = re.match(r"[0-9A-Fa-f]{1,2}", text[i + 2 :])
                if m is None:
                    raise _SyntaxError(line, esc_col, "invalid escape '\\x' (expected hex digits)")
                out.append(chr(int(m.group(0), 16)))
                i += 2 + m.end()
            elif nxt in ("u", "U"):
                width = 4 if nxt == "u" else 8
                digits = text[i + 2 : i + 2 + width]
                if len(digits) != width or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                    raise _SyntaxError(
                        line, esc_col, f"invalid escape '\\{nxt}' (expected {width} hex digits)"
                    )
                code = int(digits, 16)
                if code > 0x10FFFF:
                    raise _SyntaxError(line, esc_col, f"invalid escape '\\{nxt}{digits}'")
                out.append(chr(code))
                i += 2 + width
            else:
                shown = nxt if nxt and nxt != "\n" else ""
                raise _SyntaxError(line, esc_col, f"invalid escape '\\{shown}' in string")
        self._advance(i - self.pos)
        return "".join(out)


# --------------------------------------------------------------------------- parser
_CLOSERS = {"{": "}", "<": ">"}


@dataclass(slots=True)
class _Frame:
    """A message being read: its entries so far and where/how it was opened."""

    name: str
    entries: list[Entry]
    line: int
    col: int
    closer: str  # "}" or ">" ("" for the document)
    name_line: int
    name_col: int
    in_list: bool = False  # opened as an element of `name: [ {..}, .. ]`


def parse_pbtxt(text: str, *, file: str | None = None) -> Message:
    """Parse protobuf text format into a :class:`Message` tree.

    Parameters
    ----------
    text : str
        The document.
    file : str, optional
        File name used in error messages.

    Returns
    -------
    Message
        The top-level message; its entries are in document order.

    Raises
    ------
    SpecError
        On the first syntax error, with ``line L, column C: ...`` in the message.
    """
    if not isinstance(text, str):
        raise SpecError(f"expected text, got {type(text).__name__}", file=file)
    try:
        return _parse(_Lexer(text))
    except _SyntaxError as err:
        raise SpecError(
            [Issue("", f"line {err.line}, column {err.col}: {err.message}")], file=file
        ) from None


def _scalar(tok: _Token) -> Scalar:
    return Scalar(tok.kind, tok.text, tok.line, tok.col)


def _parse(lex: _Lexer) -> Message:
    root = _Frame("", [], 1, 1, "", 1, 1)
    stack: list[_Frame] = [root]
    # For `name: [ {...}, {...} ]` lists of messages: (name, line, col) of the open list.
    list_ctx: list[tuple[str, int, int, int]] = []  # (name, line, col, stack depth)

    def close_frame() -> bool:
        """Close the innermost message; True if that opened the next element of a list."""
        frame = stack.pop()
        msg = Message(tuple(frame.entries), frame.line, frame.col)
        stack[-1].entries.append(Entry(frame.name, msg, frame.name_line, frame.name_col))
        if frame.in_list:
            return _after_list_element(lex, stack, list_ctx)
        return False

    while True:
        frame = stack[-1]
        tok = lex.next()
        if tok.kind == "eof":
            if len(stack) > 1:
                opened = stack[-1]
                raise _SyntaxError(
                    tok.line,
                    tok.col,
                    f"expected '{opened.closer}' to close '{opened.name}' (opened at line "
                    f"{opened.line}, column {opened.col}); found end of input",
                )
            return Message(tuple(root.entries), 1, 1)
        if tok.kind == "sym" and tok.text in "}>":
            if tok.text != frame.closer:
                if frame.closer:
                    raise _SyntaxError(
                        tok.line,
                        tok.col,
                        f"expected '{frame.closer}' to close '{frame.name}' (opened at line "
                        f"{frame.line}, column {frame.col}); found '{tok.text}'",
                    )
                raise _SyntaxError(tok.line, tok.col, f"unexpected '{tok.text}' (no open message)")
            if not close_frame():
                _skip_separator(lex)
            continue
        if tok.kind != "ident" or tok.text.startswith("-"):
            raise _SyntaxError(tok.line, tok.col, f"expected a field name, found {tok.describe()}")
        name = tok
        sep = lex.next()
        if sep.kind == "sym" and sep.text in "{<":
            stack.append(
                _Frame(name.text, [], sep.line, sep.col, _CLOSERS[sep.text], name.line, name.col)
            )
            continue
        if not (sep.kind == "sym" and sep.text == ":"):
            raise _SyntaxError(
                sep.line,
                sep.col,
                f"expected ':' or '{{' after field name '{name.text}', found {sep.describe()}",
            )
        val = lex.next()
        if val.kind == "sym" and val.text in "{<":
            stack.append(
                _Frame(name.text, [], val.line, val.col, _CLOSERS[val.text], name.line, name.col)
            )
            continue
        if val.kind == "sym" and val.text == "[":
            opened = _read_list(lex, name, val, stack, list_ctx)
            if not opened:
                _skip_separator(lex)
            continue
        if val.kind in ("int", "float", "string", "ident"):
            frame.entries.append(Entry(name.text, _scalar(val), name.line, name.col))
            _skip_separator(lex)
            continue
        raise _SyntaxError(
            val.line, val.col, f"expected a value after '{name.text}:', found {val.describe()}"
        )


def _skip_separator(lex: _Lexer) -> None:
    tok = lex.peek()
    if tok.kind == "sym" and tok.text in ";,":
        lex.next()


def _read_list(
    lex: _Lexer,
    name: _Token,
    open_tok: _Token,
    stack: list[_Frame],
    list_ctx: list[tuple[str, int, int, int]],
) -> bool:
    """Read ``[ ... ]`` after ``name:``. Scalars are appended directly; a message element opens
    a frame (returns True) and the rest of the list is read when that frame closes."""
    frame = stack[-1]
    tok = lex.next()
    if tok.kind == "sym" and tok.text == "]":
        return False
    while True:
        if tok.kind == "sym" and tok.text in "{<":
            list_ctx.append((name.text, open_tok.line, open_tok.col, len(stack)))
            stack.append(
                _Frame(
                    name.text,
                    [],
                    tok.line,
                    tok.col,
                    _CLOSERS[tok.text],
                    name.line,
                    name.col,
                    in_list=True,
                )
            )
            return True
        if tok.kind not in ("int", "float", "string", "ident"):
            raise _SyntaxError(
                tok.line,
                tok.col,
                f"expected a list element of '{name.text}', found {tok.describe()}",
            )
        frame.entries.append(Entry(name.text, _scalar(tok), tok.line, tok.col))
        sep = lex.next()
        if sep.kind == "sym" and sep.text == "]":
            return False
        if not (sep.kind == "sym" and sep.text == ","):
            raise _SyntaxError(
                sep.line,
                sep.col,
                f"expected ',' or ']' in the list '{name.text}' (opened at line "
                f"{open_tok.line}, column {open_tok.col}), found {sep.describe()}",
            )
        tok = lex.next()


def _after_list_element(
    lex: _Lexer, stack: list[_Frame], list_ctx: list[tuple[str, int, int, int]]
) -> bool:
    """After a message element of a list closed: expect ',' (then another element, return True)
    or ']' (return False)."""
    name, line, col, _depth = list_ctx.pop()
    sep = lex.next()
    if sep.kind == "sym" and sep.text == "]":
        return False
    if not (sep.kind == "sym" and sep.text == ","):
        raise _SyntaxError(
            sep.line,
            sep.col,
            f"expected ',' or ']' in the list '{name}' (opened at line {line}, column {col}), "
            f"found {sep.describe()}",
        )
    tok = lex.next()
    if not (tok.kind == "sym" and tok.text in "{<"):
        raise _SyntaxError(
            tok.line,
            tok.col,
            f"expected '{{' (a message element of the list '{name}'), found {tok.describe()}",
        )
    list_ctx.append((name, line, col, len(stack)))
    parent = stack[-1]
    # The element's name position: reuse the list's field name position (first element's).
    first = next((e for e in reversed(parent.entries) if e.name == name), None)
    nline, ncol = (first.line, first.col) if first else (line, col)
    closer = _CLOSERS[tok.text]
    stack.append(_Frame(name, [], tok.line, tok.col, closer, nline, ncol, in_list=True))
    return True
