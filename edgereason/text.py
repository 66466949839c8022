"""Text from outside the program (arguments, stdin, data files, the terminal) made valid Unicode where it enters.

Rule: bytes that are not UTF-8 become U+FFFD, the replacement character, and the run goes on; nothing further
in (tokenizers, JSON, the terminal, the history file) then meets a string it cannot encode. Python hands such
bytes in arguments and stdin over as lone surrogates (its surrogateescape error handler); those become U+FFFD
too.
"""

from __future__ import annotations

import re
import sys

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a Python str holds no valid surrogate pairs, only lone ones


def clean(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD; every other character is kept."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def read_stdin() -> str:
    """All of stdin as UTF-8, undecodable bytes replaced, whatever error handler the locale gave sys.stdin."""
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")
