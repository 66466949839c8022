"""Lines a session says as its first search gets going, not while it opens: an error that stops a
search at its start stays the one line on stderr, and a chat, whose screen holds stderr, shows them
in its log instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class StartNote:
    text: str
    # what to remember once the line has been shown (a tip that is said once per model pair)
    said: Callable[[], None] = _nothing
