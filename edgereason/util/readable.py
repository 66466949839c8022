"""LaTeX made readable in a terminal, which cannot typeset: `\\frac{1}{2}` reads 1/2, `9 \\times 2`
reads 9 × 2.

The one converter of every printing path (solve, its tree, bench's examples, the chat). It runs on
text the terminal-safety filter has already made safe, `readable_math(safe_text(text))`, never
instead of it: the escapes that filter writes (`\\x1b`, `\\u202e`) pass through as they are. Display
math (`\\[...\\]`, `$$...$$`) gets lines of its own, indented under the line it opened on; inline
math (`\\(...\\)`, `$...$`) stays in place; `\\boxed{}` shows its content, the answer; unknown
commands keep their name without the backslash.

Model text can be anything, so every pass is linear in the text: a delimiter pairs with the first
partner after it, and the commands are converted by util/latex_text.py (linear, depth-bounded).
Where commands nest past what a reader could follow, the text is shown as written.
"""

from __future__ import annotations

import re
import textwrap

from edgereason.util.latex_text import TooDeep, latex_to_text

# the escapes util/terminal.safe_text writes for control characters: text, not commands
SAFE_ESCAPE = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}")
DISPLAY_OPEN = re.compile(r"\\\[|\$\$")
DISPLAY_CLOSE = re.compile(r"\\\]|\$\$")
AFTER_DISPLAY = re.compile(r"([.,;:!?]*)[ \t]*\n?")  # its punctuation, then the rest of its line
# $...$ only when it reads as math (pandoc's rule), so "$3 each and $5" keeps its dollars
INLINE = re.compile(r"(?<![\\$])\$(?=\S)([^$]+?)(?<=\S)(?<!\\)\$(?![\d$])")
STRAY = re.compile(r"\\[()\[\]]")  # a delimiter whose partner is in another step
ALIGN = re.compile(r"(?<!\\)&")  # an alignment point of aligned, cases, array
SPACES = re.compile(r"(?<=\S)[ \t]{2,}")  # the spacing commands leave runs; indentation stays
BLANK_RUNS = re.compile(r"\n{3,}")
DISPLAY_INDENT = "  "


def readable_math(text: str) -> str:
    """`text` with its LaTeX as readable plain text (display math on lines of its own); as written
    where its commands nest too deep to follow (latex_text.MAX_DEPTH)."""
    escapes = [*SAFE_ESCAPE.findall(text), ""]
    try:
        converted = "".join(
            _readable(part) + escape for part, escape in zip(SAFE_ESCAPE.split(text), escapes)
        )
    except TooDeep:
        return text
    lines = (SPACES.sub(" ", line).rstrip() for line in converted.split("\n"))
    return BLANK_RUNS.sub("\n\n", "\n".join(lines))


def _readable(text: str) -> str:
    text = _inline_parens(_displays(text))
    text = INLINE.sub(lambda m: latex_to_text(m.group(1)), text)
    return latex_to_text(STRAY.sub("", text))


def _displays(text: str) -> str:
    """Each display block (`\\[...\\]`, `$$...$$`) laid out by _display. An opening pairs with
    the first closing after it; where it has none, no later one has either, so the search ends and
    no part of the text is searched twice."""
    out, done = [], 0
    while (opening := DISPLAY_OPEN.search(text, done)) and (
        closing := DISPLAY_CLOSE.search(text, opening.end())
    ):
        newline = text.rfind("\n", done, opening.start())
        line = done if newline == -1 else newline + 1  # where the line it opens on starts
        after = AFTER_DISPLAY.match(text, closing.end())
        assert after is not None  # it matches the empty string
        lead, body = text[line : opening.start()], text[opening.end() : closing.start()]
        out += [text[done:line], _display(lead, body, after.group(1))]
        done = after.end()
    return "".join(out) + text[done:]


def _display(lead: str, body: str, tail: str) -> str:
    """A display block as lines of its own, indented under the line it opened on (its `lead`, the
    text before it there); punctuation after it (its `tail`) stays on its last line."""
    indent = lead[: len(lead) - len(lead.lstrip())] + DISPLAY_INDENT
    lines = [" ".join(line.split()) for line in latex_to_text(ALIGN.sub("", body)).split("\n")]
    lines = [line for line in lines if line]
    if not lines:
        return lead.rstrip() + "\n"
    lines[-1] += tail
    head = lead.rstrip() + "\n" if lead.strip() else ""
    return head + "\n".join(indent + line for line in lines) + "\n"


def _inline_parens(text: str) -> str:
    """Each `\\(...\\)` converted in place, paired as _displays pairs display blocks."""
    out, done = [], 0
    while (opening := text.find("\\(", done)) != -1 and (
        closing := text.find("\\)", opening + 2)
    ) != -1:
        out += [text[done:opening], latex_to_text(text[opening + 2 : closing])]
        done = closing + 2
    return "".join(out) + text[done:]


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
