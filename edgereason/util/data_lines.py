"""The lines of a data file (a problem set for bench and train-prm, `data convert`'s input) from a
path, a device, a pipe or stdin (`-`), plain or gzip-compressed: the one reader every command uses
for data, so a set reads the same whichever way it comes in.

Rules (tests/util/test_data_lines.py holds each):
- A line ends at b"\\n" alone. U+2028, U+2029, U+0085 and a lone \\r are characters of a line (JSON
  writes the first three raw inside strings), never line ends: str.splitlines() cut a record
  there. One \\r before the \\n (a CRLF file) is dropped; a file whose lines end in \\r alone (old
  Mac) is one line.
- The last line needs no \\n; a file that ends in \\n has no empty line after it.
- Blank lines are yielded (as they are) so that line numbers stay the file's; callers skip them.
- A byte-order mark at the start of a line is dropped: an editor writes one at the file's start,
  and `cat` of two such files puts the second mid-stream.
- Bytes that are not UTF-8 become U+FFFD (util/text.py's rule); a line is decoded on its own, which
  is safe since b"\\n" is never part of a multi-byte character.
- Input that starts with gzip's magic bytes is decompressed, whatever its name (`x.jsonl.gz`,
  `cat x.jsonl.gz |`); JSON text never starts with them.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import BinaryIO

from edgereason.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"
BOM = "\ufeff"


def data_lines(source: str | Path) -> Iterator[str]:
    """Each line of `source` (a path, or "-" for stdin) by the rules above; ConfigError, one line,
    for a file that is missing, a folder, unreadable, or damaged gzip."""
    name = "stdin" if str(source) == "-" else str(source)
    with _opened(source) as stream:
        try:
            for raw in _decompressed(stream):
                yield _text(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise ConfigError(
                f"cannot read {name}: damaged gzip data ({e}); decompress it again from its source"
            ) from None
        except OSError as e:
            raise ConfigError(f"cannot read {name}: {e.strerror or e}") from None


def _text(raw: bytes) -> str:
    """One line without its b"\\n" (and one \\r before it), decoded, a leading BOM dropped."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    line = raw.decode("utf-8", errors="replace")
    return line[1:] if line.startswith(BOM) else line


def _decompressed(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines, decompressed where it starts with gzip's magic bytes."""
    # a stream that cannot peek (io.BytesIO) is read through a buffer, detached after: stdin stays
    # open for its owner
    buffered = stream if hasattr(stream, "peek") else io.BufferedReader(stream)
    try:
        if buffered.peek(2)[:2] == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=buffered, mode="rb") as unpacked:
                yield from unpacked
        else:
            yield from buffered
    finally:
        if buffered is not stream:
            buffered.detach()


def _opened(source: str | Path) -> AbstractContextManager[BinaryIO]:
    """stdin's bytes (left open), or the file's; a device or a pipe (/dev/null, <(...)) is read as
    a file is."""
    if str(source) == "-":
        if sys.stdin is None:  # started with stdin closed (`<&-`)
            raise ConfigError("stdin is closed, so there is no data set to read; give its file")
        return nullcontext(sys.stdin.buffer)
    path = Path(source)
    if path.is_dir():
        raise ConfigError(f"dataset {path} is a folder; give a JSONL file")
    if not path.exists():
        raise ConfigError(f"dataset file not found: {path}")
    try:
        return path.open("rb")
    except OSError as e:
        raise ConfigError(
            f"cannot read dataset {path}: {e.strerror}; check its permissions"
        ) from None
