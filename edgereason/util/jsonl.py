"""Append-only JSONL files that a crash cannot corrupt beyond the line being written (chat history,
rollouts), and their reader, which skips such a line and reads gzip-compressed files too (joined
rollouts)."""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

from edgereason.errors import ConfigError


def append_line(path: Path, row: dict) -> None:
    """Rules: one object is one whole line written by one `write`, then fsync'd, so a crash can cut
    at most the line being written; a half line an earlier crash left at the end is ended first (it
    stays one bad line, which readers skip) so it cannot swallow this one."""
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


def read_jsonl(path: Path) -> Iterator[dict]:
    """Every complete object line; a line cut by a crash (the last one) is skipped, and nothing
    where no file is. A name ending in .gz is read through gzip (the committed rollout files): one
    cut short yields the lines before the cut; one that is not gzip, or is damaged, is a
    ConfigError."""
    if not path.is_file():
        return
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield row
    except EOFError:
        return
    except (gzip.BadGzipFile, zlib.error) as e:
        raise ConfigError(
            f"cannot read {path}: {e}; a .gz file must be gzip-compressed JSONL (decompress it, or "
            "rename it without .gz if it is plain)"
        ) from None


def without_nan(value: object) -> object:
    """JSON has no NaN: undefined measures (one class missing) are written as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nan(v) for v in value]
    return value
