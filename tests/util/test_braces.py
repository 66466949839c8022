"""util/braces: braces paired in one pass, and the last balanced `\\boxed{...}` found with them
(the final answer of a path, a MATH solution's gold answer, the step that ends a path), in linear
time on any text: a solution of unclosed `\\boxed{` kept `data convert` busy for minutes."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from linear_time import assert_linear, repeated

from edgereason.tree import has_boxed_answer
from edgereason.util.braces import closing_braces, extract_boxed, last_boxed_span

BOXED = "\\boxed{"
PIECES = [BOXED, "{", "}", "x", " ", "\\", "boxed", "\\fbox{", "\\{"]
ADVERSARIAL = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def scanned_boxed(text: str) -> str | None:
    """The scan this module replaces (a pass from each `\\boxed{`, the last first): its answers are
    the reference, its time was quadratic."""
    start = text.rfind(BOXED)
    while start != -1:
        i, depth = start + len(BOXED), 1
        for j in range(i, len(text)):
            depth += (text[j] == "{") - (text[j] == "}")
            if depth == 0:
                return text[i:j].strip()
        start = text.rfind(BOXED, 0, start)
    return None


def test_the_last_balanced_boxed_answer() -> None:
    assert extract_boxed("so \\boxed{\\frac{1}{2}} and \\boxed{18}.") == "18"
    assert extract_boxed("\\boxed{ 7 } then \\boxed{unclosed") == "7"
    assert extract_boxed("\\boxed{a \\boxed{b} c}") == "b"  # the one that opens last
    assert extract_boxed("} \\boxed{}") == "" and extract_boxed("no answer") is None
    assert last_boxed_span("x\\boxed{18}") == (8, 10)
    assert closing_braces("}{a{b}}{") == {1: 6, 3: 5}


@settings(max_examples=400, deadline=None)
@given(ADVERSARIAL)
def test_one_pass_finds_what_a_scan_from_each_boxed_finds(text: str) -> None:
    assert extract_boxed(text) == scanned_boxed(text)
    assert has_boxed_answer(text) == (scanned_boxed(text) is not None)


@pytest.mark.parametrize(
    "unit",
    [BOXED, BOXED + "x{", BOXED + "}{", "{" * 3 + BOXED, "\\boxed{1}" + BOXED, "}" + BOXED],
)
def test_adversarial_text_takes_linear_time(unit: str) -> None:
    assert_linear(extract_boxed, repeated(unit), 10_000)
    assert_linear(has_boxed_answer, repeated(unit), 10_000)


def test_a_160_kb_solution_of_unclosed_boxed_has_no_answer_in_a_moment() -> None:
    """The scan from each `\\boxed{` took `data convert` 114 s over it."""
    t0 = time.perf_counter()
    assert extract_boxed(BOXED * (160_000 // len(BOXED))) is None
    assert time.perf_counter() - t0 < 2.0
