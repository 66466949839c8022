"""JSONL files: appends a crash can cut only at the last line, and a reader that skips that line, in
plain files and in the gzip-compressed ones the project commits (rollouts); every other line is
checked against the file's schema, and one that does not fit is one error naming the file and the
line (issue 62, item 3)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from damaged_files import LINE

from edgereason.errors import ConfigError, DamagedFileError
from edgereason.util.jsonl import append_line, read_jsonl
from edgereason.util.schema import TEXT, Fields, Number

ROWS = [{"id": str(i), "text": f"step {i} é"} for i in range(200)]
ROW = Fields({"id": TEXT}, {"text": TEXT, "n": Number(least=0)})


def _appended(path: Path) -> Path:
    for row in ROWS:
        append_line(path, row)
    return path


def test_appended_rows_read_back_and_a_line_cut_by_a_crash_is_skipped(tmp_path: Path):
    path = _appended(tmp_path / "rows.jsonl")
    with path.open("ab") as f:
        f.write(b'{"id": "cut", "te')  # a crash in the middle of a write
    assert list(read_jsonl(path, ROW)) == ROWS
    # the next append ends the cut line first: it is not swallowed
    append_line(path, {"id": "next"})
    assert list(read_jsonl(path, ROW)) == [*ROWS, {"id": "next"}]


def test_no_file_reads_as_no_rows(tmp_path: Path):
    assert list(read_jsonl(tmp_path / "absent.jsonl", ROW)) == []


def test_a_gz_file_reads_as_its_plain_lines(tmp_path: Path):
    plain = _appended(tmp_path / "rows.jsonl")
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(read_jsonl(packed, ROW)) == list(read_jsonl(plain, ROW)) == ROWS


def test_a_gz_file_cut_short_yields_the_rows_before_the_cut(tmp_path: Path):
    packed = tmp_path / "rows.jsonl.gz"
    whole = gzip.compress(_appended(tmp_path / "rows.jsonl").read_bytes())
    packed.write_bytes(whole[: len(whole) // 2])
    rows = list(read_jsonl(packed, ROW))
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
        list(read_jsonl(path, ROW))


@pytest.mark.parametrize(
    "line, message",
    [
        *LINE.values(),
        (b'{"id": 7}', "id must be a string, not 7"),
        (b'{"text": "no id"}', "id is missing"),
        (b'{"id": "x", "n": NaN}', "n must be a number >= 0, not NaN"),
        (b'{"id": "x", "n": -Infinity}', "n must be a number >= 0, not -Infinity"),
    ],
    ids=[*LINE, "wrong type", "missing", "NaN", "Infinity"],
)
def test_a_whole_line_that_does_not_fit_names_the_file_and_the_line(
    tmp_path: Path, line: bytes, message: str
):
    path = _appended(tmp_path / "rows.jsonl")
    with path.open("ab") as f:
        f.write(line + b"\n")
    with pytest.raises(DamagedFileError) as e:
        list(read_jsonl(path, ROW, "remove that line"))
    assert str(e.value) == f"{path}: line {len(ROWS) + 1}: {message}; remove that line"


def test_bytes_that_are_not_utf8_in_a_whole_line_are_read_as_replacement_characters(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"id": "a\xff"}\n')
    assert list(read_jsonl(path, ROW)) == [{"id": "a\ufffd"}]
