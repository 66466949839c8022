"""util/latex_text: LaTeX commands as plain text, depth-bounded and linear in time on any model text
(500 nested `\\frac{` ended solve, bench and the chat in "unexpected RecursionError")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from linear_time import assert_linear, repeated

from edgereason.util.latex_text import MAX_DEPTH, TooDeep, latex_to_text

LATEX = [
    "\\frac",
    "\\sqrt",
    "\\binom",
    "\\boxed",
    "\\text",
    "\\pmod",
    "\\begin",
    "\\times",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "^",
    "_",
    " ",
    "x",
    "1",
    "array",
]
UNBALANCED = st.lists(st.sampled_from(LATEX), max_size=60).map("".join)


def nested(command: str, depth: int, closed: bool = True) -> str:
    """`command`'s argument holding another, `depth` deep."""
    return command + "{" * depth + "1" + ("}" * depth if closed else "")


@pytest.mark.parametrize("command", ["\\frac", "\\sqrt", "\\text", "x^", "x_"])
def test_nesting_converts_to_max_depth_and_stops_past_it(command: str) -> None:
    deep = (command + "{") * MAX_DEPTH + "1" + "}" * MAX_DEPTH
    out = latex_to_text(deep)
    assert out and not {"{", "}", "\\"} & set(out)
    with pytest.raises(TooDeep):
        latex_to_text((command + "{") * (MAX_DEPTH + 1) + "1")  # unclosed, too
    with pytest.raises(TooDeep):
        latex_to_text((command + "{") * 500 + "1" + "}{2}" * 500)


def test_an_argument_is_read_where_it_lies() -> None:
    assert latex_to_text("\\frac{\\frac{1}{2}}{3} + \\sqrt[3]{x^{2}}") == "(1/2)/3 + ³√x²"
    assert latex_to_text("\\frac{1}{2") == "1/2"  # unclosed: the argument runs to the end
    assert latex_to_text("\\sqrt[\\sqrt[3]{8}") == "√[³√8"  # the first `]` closes the first `[`
    assert latex_to_text("\\begin{array}{cc} 1 & 2 \\end{array}") == " 1 & 2 "


@settings(max_examples=300, deadline=None)
@given(UNBALANCED)
def test_any_text_converts_or_is_too_deep(text: str) -> None:
    try:
        out = latex_to_text(text)
    except TooDeep:
        return
    assert out.count("{") <= text.count("\\{")  # a brace shown is one written as `\{`


@pytest.mark.parametrize(
    "unit",
    [
        nested("\\frac", MAX_DEPTH) + "{2}",  # as deep as it goes, again and again
        nested("x^", MAX_DEPTH // 2),
        "\\sqrt[",  # each `[` looked for its `]`
        "\\sqrt[3]{x} ",
        "\\begin{array}{c}",
        "\\frac{1}{2} + ",
        "\\\\",
        "\\frac12",
        "a b c ",
    ],
)
def test_adversarial_text_takes_linear_time(unit: str) -> None:
    assert_linear(latex_to_text, repeated(unit), 10_000)
