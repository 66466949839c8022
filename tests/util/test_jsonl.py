"""JSONL files: appends a crash can cut only at the last line, and a reader that skips that line, in
plain files and in the gzip-compressed ones the project commits (rollouts)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from edgereason.errors import ConfigError
from edgereason.util.jsonl import append_line, read_jsonl

ROWS = [{"id": str(i), "text": f"step {i} é"} for i in range(200)]


def _appended(path: Path) -> Path:
    for row in ROWS:
        append_line(path, row)
    return path


def test_appended_rows_read_back_and_a_line_cut_by_a_crash_is_skipped(tmp_path: Path):
    path = _appended(tmp_path / "rows.jsonl")
    with path.open("ab") as f:
        f.write(b'{"id": "cut", "te')  # a crash in the middle of a write
    assert list(read_jsonl(path)) == ROWS
    # the next append ends the cut line first: it is not swallowed
    append_line(path, {"id": "next"})
    assert list(read_jsonl(path)) == [*ROWS, {"id": "next"}]


def test_no_file_reads_as_no_rows(tmp_path: Path):
    assert list(read_jsonl(tmp_path / "absent.jsonl")) == []


def test_a_gz_file_reads_as_its_plain_lines(tmp_path: Path):
    plain = _appended(tmp_path / "rows.jsonl")
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(read_jsonl(packed)) == list(read_jsonl(plain)) == ROWS


def test_a_gz_file_cut_short_yields_the_rows_before_the_cut(tmp_path: Path):
    packed = tmp_path / "rows.jsonl.gz"
    whole = gzip.compress(_appended(tmp_path / "rows.jsonl").read_bytes())
    packed.write_bytes(whole[: len(whole) // 2])
    rows = list(read_jsonl(packed))
    assert 0 < len(rows) < len(ROWS) and rows == ROWS[: len(rows)]


@pytest.mark.parametrize(
    "content, says",
    [
        (b'{"id": "1"}\n', "Not a gzipped file"),
        (gzip.compress(b'{"id": "1"}\n')[:10] + b"\xff" * 40, ""),
    ],
)
def test_a_gz_file_that_is_not_gzip_or_is_damaged_is_one_clear_error(
    tmp_path: Path, content: bytes, says: str
):
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(content)
    expected = (
        f"cannot read {re.escape(str(path))}: .*{says}.*a .gz file must be gzip-compressed JSONL"
    )
    with pytest.raises(ConfigError, match=expected):
        list(read_jsonl(path))
