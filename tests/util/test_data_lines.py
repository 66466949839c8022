"""The one reader of data lines (util/data_lines.py), for files, stdin and gzip: records of any
JSON, with line separators of other kinds inside their strings, read back whole, whatever the line
ends, blank lines, a last line without a new line or a byte-order mark."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgereason.errors import ConfigError
from edgereason.util.data_lines import data_lines

# what str.splitlines() also ends a line at: inside a record they are text
SEPARATORS = "\u2028\u2029\u0085\r\n\x0b\x0c\x1c\x1d\x1e"
TEXT = st.text(st.one_of(st.sampled_from(SEPARATORS), st.characters(blacklist_categories=("Cs",))))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
RECORDS = st.lists(st.dictionaries(TEXT, JSON, max_size=5), max_size=8)


@st.composite
def files(draw) -> tuple[list[dict], bytes]:
    """Records and a file of them: LF or CRLF ends, blank lines between, a last new line or not,
    a byte-order mark or not."""
    records = draw(RECORDS)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    for record in records:
        lines += [draw(st.sampled_from(["", "  ", "\t"]))] * draw(st.integers(0, 2))
        lines.append(json.dumps(record, ensure_ascii=draw(st.booleans())))
    text = end.join(lines) + (end if draw(st.booleans()) else "")
    bom = "\ufeff" if draw(st.booleans()) else ""
    return records, (bom + text).encode("utf-8")


def records_of(lines) -> list[dict]:
    return [json.loads(line) for line in lines if line.strip()]


def on_stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(given_file=files(), compressed=st.booleans())
def test_any_records_read_back_whole_from_a_file(tmp_path, given_file, compressed):
    """U+2028, U+2029, U+0085 (written raw with ensure_ascii=False) and escaped \\r, \\n inside a
    string split a record with str.splitlines(); b"\\n" alone ends a line."""
    records, data = given_file
    path = tmp_path / "set.jsonl"
    path.write_bytes(gzip.compress(data) if compressed else data)
    assert records_of(data_lines(path)) == records


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(given_file=files(), compressed=st.booleans())
def test_any_records_read_back_whole_from_stdin(monkeypatch, given_file, compressed):
    records, data = given_file
    on_stdin(monkeypatch, gzip.compress(data) if compressed else data)
    assert records_of(data_lines("-")) == records


def test_lines_are_numbered_as_the_file_is(tmp_path):
    """Blank lines are yielded (callers skip them) so a bad line's number is its line in the file;
    a CRLF end loses its \\r, a last line needs no new line, and no empty line follows a last
    \\n."""
    path = tmp_path / "set.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n  \n{"b": "x\xe2\x80\xa8y"}\n{"c": 3}')
    assert list(data_lines(path)) == ['{"a": 1}', "", "  ", '{"b": "x\u2028y"}', '{"c": 3}']
    path.write_bytes(b'{"a": 1}\n')
    assert list(data_lines(path)) == ['{"a": 1}']


def test_a_lone_carriage_return_is_no_line_end(tmp_path):
    """Old Mac line ends: the file is one line (JSON then says where it cannot be read)."""
    path = tmp_path / "set.jsonl"
    path.write_bytes(b'{"a": 1}\r{"b": 2}\r')
    assert list(data_lines(path)) == ['{"a": 1}\r{"b": 2}\r']


def test_a_byte_order_mark_starting_any_line_is_dropped(tmp_path):
    """`cat a.jsonl b.jsonl`, each saved with a mark: the second one's is mid-stream."""
    path = tmp_path / "set.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\xef\xbb\xbf{"b": 2}\n')
    assert list(data_lines(path)) == ['{"a": 1}', '{"b": 2}']


def test_bytes_that_are_not_utf8_become_the_replacement_character(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_bytes(b'{"a": "caf\xe9"}\n')
    assert list(data_lines(path)) == ['{"a": "caf\ufffd"}']


def test_gzip_is_known_by_its_bytes_not_its_name(tmp_path):
    """A .gz name that holds plain JSONL, and gzip under a plain name, both read."""
    plain, packed = tmp_path / "plain.jsonl.gz", tmp_path / "packed.jsonl"
    plain.write_bytes(b'{"a": 1}\n')
    packed.write_bytes(gzip.compress(b'{"a": 1}\n'))
    assert list(data_lines(plain)) == list(data_lines(packed)) == ['{"a": 1}']


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "dataset file not found: {p}"),
        (lambda p: p.mkdir(), "dataset {p} is a folder; give a JSONL file"),
        (
            lambda p: p.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000)[:60]),
            "cannot read {p}: damaged gzip data (",
        ),
        (
            lambda p: p.write_bytes(b"\x1f\x8b" + b"not gzip at all" * 10),
            "cannot read {p}: damaged gzip data (",
        ),
    ],
)
def test_a_file_that_cannot_be_read_is_one_line(tmp_path, make, message):
    path = tmp_path / "set.jsonl"
    make(path)
    with pytest.raises(ConfigError) as refused:
        list(data_lines(path))
    assert str(refused.value).startswith(message.format(p=path)), refused.value


def test_closed_stdin_is_one_line(monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(ConfigError, match="stdin is closed, so there is no data set to read"):
        list(data_lines("-"))


def test_stdin_is_left_open(monkeypatch):
    on_stdin(monkeypatch, b'{"a": 1}\n')
    assert list(data_lines("-")) == ['{"a": 1}'] and not sys.stdin.closed


def test_a_path_object_and_its_text_read_alike(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text('{"a": 1}\n')
    assert list(data_lines(Path(path))) == list(data_lines(str(path)))
