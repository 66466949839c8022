"""LaTeX commands as plain text (the tables: util/latex_symbols.py): `\\frac{1}{2}` reads 1/2,
`x^{2}` reads x², unknown commands keep their name without the backslash. util/readable.py finds
the math in a text and lays it out; this converts it.

Model text can nest without end (500 `\\frac{` in one step is a thousand tokens), so the converter
holds two rules:
- linear time: the text's braces are paired once (util/braces.py) and an argument is a range of
  the text, read where it lies, never copied or scanned again for its closing brace;
- bounded depth: an argument is converted inside its command's own conversion, at most MAX_DEPTH
  deep; deeper text raises TooDeep, and the caller shows the text as written.
"""

from __future__ import annotations

import re

from edgereason.util.braces import closing_braces
from edgereason.util.latex_symbols import (
    BINOMIALS,
    DROP,
    DROP_WITH_ARGUMENT,
    FRACTIONS,
    SUB,
    SUPER,
    SYMBOLS,
    UNWRAP,
)

# arguments within arguments: real math nests a few deep; a level costs at most three Python frames
MAX_DEPTH = 50
COMMAND = re.compile(r"\\([A-Za-z]+|.)")
SPECIAL = re.compile(r"[\\^_{}]")  # what is more than a character that stays as it is
# a script's table, and the characters it maps to: a script shown raised needs all of them in it
SCRIPTS = {
    mark: (table, frozenset(map(chr, table.values()))) for mark, table in [("^", SUPER), ("_", SUB)]
}


class TooDeep(Exception):
    """Arguments nested deeper than MAX_DEPTH: the text is best shown as written."""


def latex_to_text(text: str) -> str:
    """`text` with its LaTeX commands as plain text; TooDeep where they nest past MAX_DEPTH."""
    return _Latex(text).convert(0, len(text), 0)


class _Latex:
    """One text's commands converted: its braces paired once, each argument read as the range
    [start, end) of the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.closes = closing_braces(text)
        self.bracket: tuple[int, int] | None = None  # the last search for `]`: from, found (or -1)

    def convert(self, start: int, end: int, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise TooDeep(f"arguments nested more than {MAX_DEPTH} deep")
        s, out, i = self.text, [], start
        while i < end:
            special = SPECIAL.search(s, i, end)
            stop = end if special is None else special.start()
            out.append(s[i:stop])
            i = stop
            if i == end:
                break
            c = s[i]
            if c in "^_":
                first, last, i = self.group(i + 1, end)
                out.append(self.script(c, first, last, depth))
            elif c in "{}":
                i += 1
            elif (m := COMMAND.match(s, i, end)) is None:  # a backslash before a line break or last
                out.append(c)
                i += 1
            else:
                piece, i = self.command(m.group(1), m.end(), end, depth)
                out.append(piece)
        return "".join(out)

    def group(self, i: int, end: int) -> tuple[int, int, int]:
        """The argument at text[i] before `end` (a {...} group, or one character): its range and
        the index after it. An unclosed group runs to `end`."""
        s = self.text
        while i < end and s[i] == " ":
            i += 1
        if i >= end:
            return i, i, i
        if s[i] != "{":
            return i, i + 1, i + 1
        close = self.closes.get(i, end)
        return (i + 1, end, end) if close >= end else (i + 1, close, close + 1)

    def optional(self, i: int, end: int) -> tuple[int, int, int]:
        """An optional [...] argument at text[i] (a root's index), or an empty range."""
        if i < end and self.text[i] == "[":
            close = self.closing_bracket(i + 1)
            if 0 <= close < end:
                return i + 1, close, close + 1
        return i, i, i

    def closing_bracket(self, i: int) -> int:
        """The first `]` at or after i, or -1. The last search's answer holds while it lies at or
        after i, so the text is searched once however many `[` it has."""
        if self.bracket is not None:
            searched, found = self.bracket
            if searched <= i and (found == -1 or found >= i):
                return found
        self.bracket = (i, self.text.find("]", i))
        return self.bracket[1]

    def script(self, mark: str, start: int, end: int, depth: int) -> str:
        table, raised = SCRIPTS[mark]
        plain = self.convert(start, end, depth + 1)
        mapped = plain.translate(table)
        if mapped and set(mapped) <= raised:
            return mapped
        return mark + (plain if len(plain) == 1 else f"({plain})")

    def command(self, name: str, i: int, end: int, depth: int) -> tuple[str, int]:
        """What the command `name` becomes, its arguments read from text[i:end], and the index
        after them."""
        if name in FRACTIONS or name in BINOMIALS:
            top, i = self.argument(i, end, depth)
            bottom, i = self.argument(i, end, depth)
            shown = f"{_wrap(top)}/{_wrap(bottom)}" if name in FRACTIONS else f"C({top}, {bottom})"
            return shown, i
        if name == "sqrt":
            first, last, i = self.optional(i, end)
            index = self.convert(first, last, depth + 1)
            arg, i = self.argument(i, end, depth)
            return f"{index.translate(SUPER)}√{_wrap(arg)}", i
        if name == "pmod":
            arg, i = self.argument(i, end, depth)
            return f"(mod {arg})", i
        if name in ("mod", "bmod"):
            return "mod", i
        if name in UNWRAP:
            return self.argument(i, end, depth)
        if name in DROP_WITH_ARGUMENT:
            first, last, i = self.group(i, end)
            if name == "begin" and self.text[first:last] in ("array", "tabular"):
                i = self.group(i, end)[2]  # the column spec
            return "", i
        if name in DROP:
            return "", i
        return SYMBOLS.get(name, name), i

    def argument(self, i: int, end: int, depth: int) -> tuple[str, int]:
        """The argument at text[i] converted, and the index after it."""
        first, last, i = self.group(i, end)
        return self.convert(first, last, depth + 1), i


def _wrap(x: str) -> str:
    return x if len(x) <= 1 or x.isalnum() else f"({x})"
