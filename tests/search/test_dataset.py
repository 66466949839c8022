"""Benchmark and training problems from JSONL files: limits, offsets, and the lines no grader could
use."""

from __future__ import annotations

import gzip
import io
import json
import sys
import time
from pathlib import Path

import pytest

from edgereason.errors import ConfigError
from edgereason.search.dataset import load_problems


def test_dataset_limit_offset_and_errors(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "problem": f"q{i}", "answer": i}) + "\n" for i in range(5)
        )
    )
    assert [p.id for p in load_problems(path, limit=2, offset=1)] == ["p1", "p2"]
    assert load_problems(path)[4].answer == "4"
    with pytest.raises(ConfigError, match="not found"):
        load_problems(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="no problems"):
        load_problems(path, offset=5)
    path.write_text('{"id": "a", "problem": "q", "answer": 1}\n' * 2)
    with pytest.raises(ConfigError, match="twice"):
        load_problems(path)
    path.write_text('{"problem": "q"}\n')
    with pytest.raises(ConfigError, match=":1:"):
        load_problems(path)


def test_a_missing_or_null_id_is_the_file_and_line(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(
        '{"id": null, "problem": "q", "answer": 1}\n{"problem": "r", "answer": 2}\n'
        '{"id": 0, "problem": "s", "answer": 3}\n'
    )
    assert [p.id for p in load_problems(path)] == ["set-1", "set-2", "0"]


@pytest.mark.parametrize(
    "answer, kind",
    [
        ('["4", "5"]', "a list"),
        ('{"x": 1}', "an object"),
        ("true", "true"),
        ("false", "false"),
        # Python's json reads them; stored as "nan" and "inf" before, without a word
        ("NaN", "NaN"),
        ("Infinity", "infinite"),
        ("-Infinity", "infinite"),
    ],
)
def test_an_answer_no_model_writes_is_refused_with_its_line(tmp_path, answer, kind):
    """Stored as its Python text before ("['4', '5']", "True"), a gold answer no run could match."""
    path = tmp_path / "set.jsonl"
    path.write_text('{"problem": "q", "answer": "4"}\n{"problem": "r", "answer": ' + answer + "}\n")
    with pytest.raises(ConfigError) as refused:
        load_problems(path)
    assert (
        str(refused.value)
        == f"{path}:2: 'answer' is {kind}; give one gold answer as a string or a number"
    )


@pytest.mark.parametrize(
    "field, value, kind",
    [
        ("problem", '["a"]', "a list"),
        ("problem", '{"q": 1}', "an object"),
        ("problem", "12", "a number"),
        ("id", '["a"]', "a list"),
    ],
)
def test_a_problem_or_id_that_is_not_text_is_refused_with_its_line(tmp_path, field, value, kind):
    """A list given as the problem was sent to the model as the text ['a']."""
    path = tmp_path / "set.jsonl"
    row = {"problem": '"q"', "answer": '"4"', field: value}
    path.write_text("{" + ", ".join(f'"{k}": {v}' for k, v in row.items()) + "}\n")
    with pytest.raises(ConfigError) as refused:
        load_problems(path)
    assert str(refused.value).startswith(f"{path}:1: '{field}' is {kind}; give ")


def test_a_problem_of_zero_width_characters_alone_is_refused_with_its_line(tmp_path):
    """It passed the check for an empty problem: the model got the prompt around nothing."""
    path = tmp_path / "set.jsonl"
    rows = [
        {"problem": "What is 2+3?\u200b", "answer": 5},
        {"problem": "\u200b\u2060 ", "answer": 1},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(ConfigError) as refused:
        load_problems(path)
    assert str(refused.value) == (
        f"{path}:2: the problem has no visible characters (only zero-width or other invisible "
        "ones); give the problem's text"
    )
    path.write_text(json.dumps(rows[0]) + "\n")  # beside visible text one is no matter
    assert load_problems(path)[0].problem == "What is 2+3?\u200b"


def test_a_device_or_a_pipe_is_read_and_an_empty_one_has_no_problems(tmp_path):
    """--dataset /dev/null said "not found"."""
    with pytest.raises(ConfigError) as refused:
        load_problems("/dev/null")
    assert str(refused.value).startswith("/dev/null holds no problems; give a JSONL file")


def test_a_number_answer_is_its_json_text(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text('{"problem": "q", "answer": 18}\n{"problem": "r", "answer": 2.5}\n')
    assert [p.answer for p in load_problems(path)] == ["18", "2.5"]


def test_the_shipped_sample_is_20_gsm8k_test_problems():
    sample = load_problems(Path(__file__).resolve().parents[2] / "examples" / "gsm8k_sample.jsonl")
    assert [p.id for p in sample] == [f"gsm8k-{i}" for i in range(20)] and sample[0].answer == "18"


def test_a_duplicate_id_names_both_lines(tmp_path):
    path = tmp_path / "set.jsonl"
    rows = [{"id": i, "problem": "q", "answer": 1} for i in ("a", "b", "c", "b")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError) as refused:
        load_problems(path)
    assert str(refused.value) == (
        f"{path}: id 'b' appears twice (lines 2 and 4); request ids must be unique within a run"
    )


def test_the_duplicate_check_is_linear(tmp_path):
    """200,000 lines whose last id repeats the one before: quadratic before (20k lines 4.5 s, 40k
    16 s, 200k past 300 s); now about a second, held to a generous bound for a loaded machine."""
    path = tmp_path / "set.jsonl"
    rows = [{"id": f"p{i}", "problem": f"q{i}", "answer": i} for i in range(199_999)]
    rows.append({"id": "p199998", "problem": "again", "answer": 0})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    started = time.process_time()
    with pytest.raises(ConfigError, match="'p199998' appears twice"):
        load_problems(path)
    assert time.process_time() - started < 15


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\r", "\r\n"])
def test_a_record_holding_a_line_separator_reads_alike_by_path_and_on_stdin(
    tmp_path, monkeypatch, separator
):
    """str.splitlines() cut the stdin record at U+2028 (written raw by data convert): `data convert
    gsm.jsonl | edgereason bench --dataset -` failed where the same file by path was read."""
    path = tmp_path / "set.jsonl"
    row = {"id": "a", "problem": f"Line one{separator}line two: what is 2+2?", "answer": "4"}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", newline="")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert load_problems("-")[0].problem == load_problems(path)[0].problem == row["problem"]


def test_crlf_gzip_a_byte_order_mark_and_blank_lines(tmp_path):
    """Line numbers count blank lines; a CRLF file, gzip and a byte-order mark read as plain."""
    path = tmp_path / "set.jsonl.gz"
    text = '\ufeff{"problem": "q", "answer": 1}\r\n\r\n{"problem": "r", "answer": 2}'
    path.write_bytes(gzip.compress(text.encode()))
    assert [(p.id, p.answer) for p in load_problems(path)] == [
        ("set-1", "1"),
        ("set-3", "2"),
    ]
