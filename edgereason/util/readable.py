"""LaTeX made readable in a terminal, which cannot typeset: `\\frac{1}{2}` reads 1/2, `9 \\times 2`
reads 9 × 2.

The one converter of every printing path (solve, its tree, bench's examples, the chat). It runs on
text the terminal-safety filter has already made safe, `readable_math(safe_text(text))`, never
instead of it: the escapes that filter writes (`\\x1b`, `\\u202e`) pass through as they are. Display
math (`\\[...\\]`, `$$...$$`) gets lines of its own, indented under the line it opened on; inline
math (`\\(...\\)`, `$...$`) stays in place; `\\boxed{}` shows its content, the answer; unknown
commands keep their name without the backslash.
"""

from __future__ import annotations

import re
import textwrap

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

# the escapes util/terminal.safe_text writes for control characters: text, not commands
SAFE_ESCAPE = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}")
# a display block: the text before it on its line, its body, the punctuation right after it
DISPLAY = re.compile(
    r"(?P<lead>[^\n]*?)(?:\\\[|\$\$)(?P<body>.*?)(?:\\\]|\$\$)"
    r"(?P<tail>[.,;:!?]*)[ \t]*\n?",
    re.S,
)
INLINE_PARENS = re.compile(r"\\\((.*?)\\\)", re.S)
# $...$ only when it reads as math (pandoc's rule), so "$3 each and $5" keeps its dollars
INLINE = re.compile(r"(?<![\\$])\$(?=\S)([^$]+?)(?<=\S)(?<!\\)\$(?![\d$])")
STRAY = re.compile(r"\\[()\[\]]")  # a delimiter whose partner is in another step
ALIGN = re.compile(r"(?<!\\)&")  # an alignment point of aligned, cases, array
SPACES = re.compile(r"(?<=\S)[ \t]{2,}")  # the spacing commands leave runs; indentation stays
BLANK_RUNS = re.compile(r"\n{3,}")
COMMAND = re.compile(r"\\([A-Za-z]+|.)")
DISPLAY_INDENT = "  "


def readable_math(text: str) -> str:
    """`text` with its LaTeX as readable plain text (display math on lines of its own)."""
    escapes = [*SAFE_ESCAPE.findall(text), ""]
    text = "".join(
        _readable(part) + escape for part, escape in zip(SAFE_ESCAPE.split(text), escapes)
    )
    lines = (SPACES.sub(" ", line).rstrip() for line in text.split("\n"))
    return BLANK_RUNS.sub("\n\n", "\n".join(lines))


def _readable(text: str) -> str:
    text = DISPLAY.sub(_display, text)
    text = INLINE_PARENS.sub(lambda m: _convert(m.group(1)), text)
    text = INLINE.sub(lambda m: _convert(m.group(1)), text)
    return _convert(STRAY.sub("", text))


def _display(m: re.Match[str]) -> str:
    """A display block as lines of its own, indented under the line it opened on; punctuation after
    it stays on its last line."""
    lead = m.group("lead")
    indent = lead[: len(lead) - len(lead.lstrip())] + DISPLAY_INDENT
    body = _convert(ALIGN.sub("", m.group("body")))
    lines = [" ".join(line.split()) for line in body.split("\n")]
    lines = [line for line in lines if line]
    if not lines:
        return lead.rstrip() + "\n"
    lines[-1] += m.group("tail")
    head = lead.rstrip() + "\n" if lead.strip() else ""
    return head + "\n".join(indent + line for line in lines) + "\n"


def _group(s: str, i: int) -> tuple[str, int]:
    """The argument starting at s[i] (a {...} group or one character) and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
    return s[i + 1 :], len(s)


def _optional(s: str, i: int) -> tuple[str, int]:
    """An optional [...] argument at s[i] (a root's index), or "" where there is none."""
    if i < len(s) and s[i] == "[" and (end := s.find("]", i)) > 0:
        return s[i + 1 : end], end + 1
    return "", i


def _wrap(x: str) -> str:
    return x if len(x) <= 1 or x.isalnum() else f"({x})"


def _script(arg: str, table: dict[int, int], mark: str) -> str:
    plain = _convert(arg)
    mapped = plain.translate(table)
    if mapped and all(ord(c) in table.values() for c in mapped):
        return mapped
    return mark + (plain if len(plain) == 1 else f"({plain})")


def _command(name: str, s: str, i: int) -> tuple[str, int]:
    """What the command `name` becomes, its arguments read from s[i:], and the index after them."""
    if name in FRACTIONS or name in BINOMIALS:
        top, i = _group(s, i)
        bottom, i = _group(s, i)
        top, bottom = _convert(top), _convert(bottom)
        return (f"{_wrap(top)}/{_wrap(bottom)}" if name in FRACTIONS else f"C({top}, {bottom})"), i
    if name == "sqrt":
        index, i = _optional(s, i)
        arg, i = _group(s, i)
        return f"{_convert(index).translate(SUPER)}√{_wrap(_convert(arg))}", i
    if name in ("pmod", "mod", "bmod"):
        arg, i = _group(s, i) if name == "pmod" else ("", i)
        return (f"(mod {_convert(arg)})" if name == "pmod" else "mod"), i
    if name in UNWRAP:
        arg, i = _group(s, i)
        return _convert(arg), i
    if name in DROP_WITH_ARGUMENT:
        arg, i = _group(s, i)
        if name == "begin" and arg in ("array", "tabular"):
            _, i = _group(s, i)  # the column spec
        return "", i
    if name in DROP:
        return "", i
    return SYMBOLS.get(name, name), i


def _convert(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c in "^_":
            arg, i = _group(s, i + 1)
            out.append(_script(arg, SUPER if c == "^" else SUB, c))
            continue
        if c in "{}":
            i += 1
            continue
        m = COMMAND.match(s, i) if c == "\\" else None
        if m is None:
            out.append(c)
            i += 1
            continue
        piece, i = _command(m.group(1), s, m.end())
        out.append(piece)
    return "".join(out)


def hanging(head: str, text: str, width: int | None = None) -> str:
    """`text` after `head`, each of its later lines indented under its first; with a `width` (a
    terminal's), long lines wrap, each under its own indentation."""
    pad = " " * len(head)
    lines = text.split("\n")
    if width is None or width <= len(head) + 20:
        return head + "\n".join([lines[0], *(pad + line if line else "" for line in lines[1:])])
    out = []
    for n, line in enumerate(lines):
        lead = line[: len(line) - len(line.lstrip())]
        first = (head if n == 0 else pad) + lead
        wrapped = textwrap.wrap(
            line.strip(), width, initial_indent=first, subsequent_indent=pad + lead
        )
        out.extend(wrapped or [""])
    return "\n".join(out)
