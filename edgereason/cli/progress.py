"""A one-line progress bar on stderr (stdout stays clean for JSON)."""

from __future__ import annotations

import sys
from typing import Callable


def bar(label: str, width: int = 24) -> Callable[[int, int], None]:
    """show(done, total) redraws the line when `done` changes."""
    last = [-1]

    def show(done: int, total: int) -> None:
        if done == last[0]:
            return
        last[0] = done
        filled = int(width * done / max(1, total))
        print(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr,
              flush=True)

    return show
