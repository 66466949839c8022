"""Text from outside the program (arguments, stdin, data files, the terminal) made valid Unicode
where it enters.

Rule: bytes that are not UTF-8 become U+FFFD, the replacement character, and the run goes on;
nothing further in (tokenizers, JSON, the terminal, the history file) then meets a string it cannot
encode. Python hands such bytes in arguments and stdin over as lone surrogates (its surrogateescape
error handler); those become U+FFFD too, and so does NUL: llama.cpp's chat template takes C strings,
which end at the first NUL, so the model would see the problem cut there while the PRM saw all of
it."""

from __future__ import annotations

import re
import sys
import unicodedata

from edgereason.errors import ConfigError

# a Python str holds no valid surrogate pairs, only lone ones
_UNENCODABLE = re.compile("[\ud800-\udfff\x00]")


def clean(text: str) -> str:
    """`text` with each lone surrogate and NUL replaced by U+FFFD; every other character is kept."""
    return _UNENCODABLE.sub("\ufffd", text)


def blank_problem(problem: str) -> str | None:
    """Why `problem` holds nothing to solve, or None: it is empty (spaces alone), or every
    character is invisible: whitespace, a format character (category Cf: the zero-width space
    U+200B, U+2060, U+FEFF, the soft hyphen) or a control character. Such a problem looks empty
    wherever it is shown, and the model gets only the prompt around it."""
    if not problem.strip():
        return "the problem is empty"
    if all(ch.isspace() or unicodedata.category(ch) in ("Cf", "Cc") for ch in problem):
        return "the problem has no visible characters (only zero-width or other invisible ones)"
    return None


def read_stdin() -> str:
    """All of stdin as UTF-8, undecodable bytes replaced, whatever error handler the locale gave
    sys.stdin; a leading byte-order mark (Windows editors and PowerShell write one) is not part of
    the text."""
    if sys.stdin is None:  # started with stdin closed (`<&-`)
        raise ConfigError(
            "stdin is closed, so there is no problem to read from it; pass the problem text "
            "instead of -"
        )
    return sys.stdin.buffer.read().decode("utf-8-sig", errors="replace")
