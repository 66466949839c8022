"""Braces in model or data text paired in one pass, and the `\\boxed{...}` answer found with them.

Scanning from each opening brace to the brace that closes it took a pass per opening: a MATH
solution of unclosed `\\boxed{` (160 KB) kept `data convert` busy for minutes. Here one pass pairs
every brace (a stack of the open ones), so the time is linear in the text whatever its braces do.
An opening is closed by the first brace after it that brings the count of braces between them back
to zero, as a scan from that opening alone finds it, so a pair found in the whole text is a pair in
any part of it that holds both.
"""

from __future__ import annotations

import re

BRACE = re.compile(r"[{}]")
BOXED = re.compile(r"\\boxed\{")


def closing_braces(text: str) -> dict[int, int]:
    """Each `{` of text that is closed: its index, and the index of the `}` that closes it."""
    closes: dict[int, int] = {}
    opened: list[int] = []
    for brace in BRACE.finditer(text):
        if brace.group() == "{":
            opened.append(brace.start())
        elif opened:  # a `}` with no `{` open before it closes nothing
            closes[opened.pop()] = brace.start()
    return closes


def last_boxed_span(text: str) -> tuple[int, int] | None:
    """Where the content of the last `\\boxed{...}` whose braces balance lies in text (its start
    and end), or None."""
    closes = closing_braces(text)
    last = None
    for boxed in BOXED.finditer(text):
        if (end := closes.get(boxed.end() - 1)) is not None:
            last = (boxed.end(), end)
    return last


def extract_boxed(text: str) -> str | None:
    """The content of the last balanced `\\boxed{...}` in text, stripped, or None."""
    span = last_boxed_span(text)
    return None if span is None else text[span[0] : span[1]].strip()
