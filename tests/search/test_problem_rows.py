"""One rule for a problem record (search/problem_rows.py): what `data convert` writes, bench and
train-prm read. Before, convert wrote NaN and Infinity gold answers as "nan" and "inf", and ids that
were lists, objects or true, which bench then refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgereason.search.dataset import load_problems
from edgereason.search.formats import Skipped, convert_lines
from edgereason.search.problem_rows import row_fault

GOOD = {"id": "a", "problem": "What is 2+2?", "answer": "4"}


@pytest.mark.parametrize(
    "change, fault",
    [
        ({}, None),
        ({"answer": 4}, None),
        ({"answer": 2.5}, None),
        ({"id": 7}, None),
        ({"id": None}, None),
        ({"answer": float("nan")}, "'answer' is NaN; give one gold answer as a string or a number"),
        ({"answer": float("-inf")}, "'answer' is infinite; give one gold answer"),
        ({"answer": True}, "'answer' is true; give one gold answer"),
        ({"answer": ["4"]}, "'answer' is a list; give one gold answer"),
        ({"answer": "  "}, "'answer' is empty; give the gold final answer"),
        ({"answer": None}, "each line needs a non-empty 'problem' and an 'answer'"),
        ({"problem": None}, "each line needs a non-empty 'problem' and an 'answer'"),
        ({"problem": " \n"}, "'problem' is empty; give the problem's text"),
        ({"problem": 12}, "'problem' is a number; give the problem as a string"),
        ({"id": True}, "'id' is true; give the id as a string or a whole number"),
        ({"id": 1.5}, "'id' is a decimal number; give the id as a string or a whole number"),
        ({"id": {"n": 1}}, "'id' is an object; give the id"),
        ({"id": [1]}, "'id' is a list; give the id"),
    ],
)
def test_each_field_is_checked_by_one_rule(change, fault):
    found = row_fault(GOOD | change)
    assert found == fault if fault is None else found.startswith(fault), found


def test_a_line_that_is_not_an_object_is_named_so():
    assert row_fault(["a"]) == "not a JSON object"


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(),  # NaN and the infinities too
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {"problem": VALUES | st.text(min_size=1), "answer": VALUES},
        optional={"id": VALUES, "solution": VALUES, "source": VALUES},
    ),
    max_size=6,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=ROWS)
def test_what_convert_writes_bench_reads(tmp_path, rows):
    """Every record convert writes loads, with its gold answer and id; every one it skips breaks
    the rule."""
    lines = [json.dumps(row) for row in rows]
    written = [r for r in convert_lines(lines) if not isinstance(r, Skipped)]
    path = tmp_path / "converted.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in written))
    if written:
        loaded = load_problems(path)
        assert [p.answer for p in loaded] == [r["answer"] for r in written]
        assert [p.id for p in loaded] == [str(r["id"]) for r in written]
    assert all(row_fault(r) is None for r in written)
    kept, seen = [], set()
    for n, row in enumerate(rows, 1):  # those that keep the rule, each id's first
        source = row.get("source")
        named = source if isinstance(source, str) and source.strip() else "edgereason"
        pid = str(row["id"]) if row.get("id") is not None else f"{named}-{n}"
        if row_fault(row) is None and pid not in seen:
            kept.append(pid)
            seen.add(pid)
    assert [str(r["id"]) for r in written] == kept
