"""Append-only JSONL files that a crash cannot corrupt beyond the line being written (chat history,
rollouts), and their reader, which skips such a line, checks every other against a schema
(util/schema.py) and reads gzip-compressed files too (joined rollouts)."""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

from edgereason.errors import ConfigError, DamagedFileError
from edgereason.util.schema import ANY, MapOf, Schema, Wrong

ANY_OBJECT = MapOf(ANY)


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


def read_jsonl(path: Path, schema: Schema = ANY_OBJECT, todo: str = "") -> Iterator[dict]:
    """Every object line, checked against `schema` (by default any object, for the lab's scripts;
    the program's readers pass their files' own); nothing where no file is. A line a crash cut (one
    that is not JSON) is skipped; a whole line that does not fit is DamagedFileError naming the
    file, the line and its first wrong field, then `todo`. A name ending in .gz is read through gzip
    (the committed rollout files): one cut short yields the lines before the cut; one that is not
    gzip, or is damaged, is a ConfigError."""
    if not path.is_file():
        return
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                except RecursionError:
                    raise DamagedFileError(
                        path, f"line {number}: nested too deep to read", todo
                    ) from None
                yield _checked(row, schema, f"line {number}", path, todo)
    except EOFError:
        return
    except (gzip.BadGzipFile, zlib.error) as e:
        raise ConfigError(
            f"cannot read {path}: {e}; a .gz file must be gzip-compressed JSONL (decompress it, or "
            "rename it without .gz if it is plain)"
        ) from None


def _checked(row: dict, schema: Schema, line: str, path: Path, todo: str) -> dict:
    """The row, where it fits `schema` (an object's, Fields or MapOf: JSON may hold a list)."""
    try:
        schema.check(row, "")
    except Wrong as e:
        raise DamagedFileError(path, f"{line}: {e}", todo) from None
    return row


def without_nan(value: object) -> object:
    """JSON has no NaN: undefined measures (one class missing) are written as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nan(v) for v in value]
    return value
