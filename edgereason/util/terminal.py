"""Untrusted text made safe to print: what a model generates, what a server answers, a data file's
strings.

Such text must never drive the user's terminal. Every C0 control character but the line break and
the tab, DEL, every C1 control character (U+0080..U+009F: the 8-bit CSI U+009B starts a sequence as
ESC [ does) and the bidirectional overrides (which reorder what is shown) are written as visible
escapes (`\\x1b`, `\\u202e`), so an escape sequence arrives as text: `\\x1b[2J` is shown, the screen
is not cleared. `one_line` escapes line breaks and tabs too, for a message that must stay one line.
This is the one filter for every printing path (solve, the tree, bench, error messages, the chat
UI); formatting for reading (readable math) runs on its output, never instead."""

from __future__ import annotations

import re
from pathlib import Path

_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROL}]")
_UNSAFE_ONE_LINE = re.compile(f"[{_CONTROL}\n\t]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str, one_line: bool = False) -> str:
    """`text` with each control character (and, with one_line, each line break and tab) written as
    an escape."""
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_visible, text)


def shown_path(path: Path | str) -> str:
    """A path as a message shows it, on one line: a folder named with an escape sequence (`--out
    $'\\e[2J'`) is shown, never run."""
    return safe_text(str(path), one_line=True)
