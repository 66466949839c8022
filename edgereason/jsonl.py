"""Append-only JSONL files that a crash cannot corrupt beyond the line being written (chat history, rollouts)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def append_line(path: Path, row: dict) -> None:
    """Rules: one object is one whole line written by one `write`, then fsync'd, so a crash can cut at most the
    line being written; a half line an earlier crash left at the end is ended first (it stays one bad line, which
    readers skip) so it cannot swallow this one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        if written < len(line):  # a full disk: the cut line is repaired by the next append
            raise OSError(f"wrote {written} of {len(line)} bytes to {path}")
        os.fsync(fd)
    finally:
        os.close(fd)
