"""util/readable.readable_math: the one LaTeX-to-text converter of solve, its tree, bench and the
chat; any model text is converted, or shown as written where it nests too deep, in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from linear_time import assert_linear, repeated

from edgereason.util.latex_symbols import (
    BINOMIALS,
    DROP,
    DROP_WITH_ARGUMENT,
    FRACTIONS,
    SYMBOLS,
    UNWRAP,
)
from edgereason.util.readable import hanging, readable_math
from edgereason.util.terminal import safe_text

# a step Qwen2.5-Coder-1.5B wrote for the README's problem (solve --json), as it wrote it
QWEN_STEP = (
    "5. **Multiply the number of remaining eggs by the price per egg to find the daily "
    "earnings:**\n"
    "   The price per fresh duck egg is $2.\n   \\[\n   9 \\times 2 = 18\n   \\]\n\n"
)
COMMAND = re.compile(r"\\[A-Za-z]")


def test_inline_math_reads_as_text_in_place() -> None:
    assert readable_math(r"\(\frac{1}{2} + x^2 = \boxed{\dfrac{3}{4}}\)") == "1/2 + x² = 3/4"
    assert readable_math(r"$\sqrt{16} \times 3 \le 12$") == "√16 × 3 ≤ 12"
    assert readable_math(r"\frac{a+b}{2}") == "(a+b)/2"
    assert readable_math(r"\text{so } x_{10}") == "so x₁₀"
    assert readable_math(r"5\% of \$20") == "5% of $20"
    assert readable_math(r"\unknowncmd") == "unknowncmd"
    assert (
        readable_math("pencils cost $3 each and $5 for two")
        == "pencils cost $3 each and $5 for two"
    )
    assert readable_math("costs $3. Then $x+1$ holds") == "costs $3. Then x+1 holds"
    assert readable_math(r"makes \(\boxed{18}\) dollars") == "makes 18 dollars"
    assert readable_math(r"\sqrt[3]{27} = 3, \binom{5}{2} = 10, x \equiv 3 \pmod{7}") == (
        "³√27 = 3, C(5, 2) = 10, x ≡ 3 (mod 7)"
    )


def test_display_math_gets_lines_of_its_own_under_its_line() -> None:
    assert readable_math(QWEN_STEP) == (
        "5. **Multiply the number of remaining eggs by the price per egg to find the daily "
        "earnings:**\n"
        "   The price per fresh duck egg is $2.\n     9 × 2 = 18\n\n"
    )
    assert readable_math("The total is: \\[ 9 \\times 2 = 18 \\]. So she makes $18.") == (
        "The total is:\n  9 × 2 = 18.\nSo she makes $18."
    )
    aligned = "Sum:\n$$\n\\begin{aligned}\na &= 1 + 2 \\\\\nb &= \\frac{6}{2}\n"
    aligned += "\\end{aligned}\n$$\nDone."
    assert readable_math(aligned) == "Sum:\n  a = 1 + 2\n  b = 6/2\nDone."


def test_a_delimiter_whose_partner_is_in_another_step_is_dropped() -> None:
    assert readable_math("So:\n\\[ 16 - 3") == "So:\n 16 - 3"
    assert readable_math("= 13 \\]") == "= 13"


def test_no_command_of_the_tables_keeps_its_backslash() -> None:
    names = [
        *SYMBOLS,
        *UNWRAP,
        *DROP,
        *DROP_WITH_ARGUMENT,
        *FRACTIONS,
        *BINOMIALS,
        "sqrt",
        "pmod",
        "bmod",
    ]
    for name in names:
        for written in (f"\\{name}{{x}}{{y}} + 1", f"\\({name} \\{name}{{2}}\\)"):
            out = readable_math(written)
            assert not COMMAND.search(out), (written, out)


@pytest.mark.parametrize("control", ["\x1b[2J", "\x1b]0;owned\x07", "\u202e", "\x9b31m"])
def test_it_runs_after_the_safety_filter_and_keeps_its_escapes(control: str) -> None:
    out = readable_math(safe_text(f"x \\times {control} \\frac{{1}}{{2}}"))
    assert out == f"x × {safe_text(control)} 1/2"
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 for c in out)


# what models write around math, without the commands that drop their argument unread (\\begin)
PIECES = "\\frac \\sqrt \\boxed \\text \\times \\( \\) \\[ \\] $ $$ \\\\ \\x1b".split()
PIECES += ["\\", " ", "\n", *"{}[]^_&x1."]
UNBALANCED = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)
DEEP = "\\frac{" * 500 + "1" + "}{2}" * 500  # some 1,000 tokens, inside one default step


def test_text_nested_too_deep_is_shown_as_written_through_the_safety_filter() -> None:
    """It ended solve, bench and the chat in "unexpected RecursionError"."""
    step = safe_text(f"So \\(x = \\boxed{{{DEEP}}}\\).\x1b[2J")
    assert readable_math(step) == step and "\x1b" not in step


@settings(max_examples=200, deadline=None)
@given(UNBALANCED)
def test_whatever_comes_before_deep_text_it_is_shown_as_written(before: str) -> None:
    assert readable_math(before + DEEP) == before + DEEP


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*PIECES, "\\begin", "\\end", "\\sqrt["]), max_size=80))
def test_unbalanced_text_converts_without_an_error(pieces: list[str]) -> None:
    assert isinstance(readable_math("".join(pieces)), str)


@pytest.mark.parametrize(
    "unit",
    [
        "\\[ a ",  # display openings with no closing: the regex tried each against the rest
        "a",  # one long line: the display regex tried each of its starts to its end
        "\\( a ",
        "$$ a $$ ",
        "$a",
        "\\sqrt[",
        "\\frac{1}{2} ",
        "\\frac{",
        "x^{",
        "\\[\\frac{1}{2}\\] ",
        "\\x1b\\frac",
    ],
)
def test_adversarial_text_takes_linear_time(unit: str) -> None:
    assert_linear(readable_math, repeated(unit), 10_000)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join))
def test_any_repeated_text_takes_linear_time(unit: str) -> None:
    assert_linear(readable_math, repeated(unit), 10_000)


@pytest.mark.parametrize("unit", ["a", "a-", "a ", "-- ", "\\frac{1}{2}-"])
def test_wrapping_takes_linear_time(unit: str) -> None:
    assert_linear(lambda text: hanging("  [1] (0.900) ", text, 80), repeated(unit), 10_000)
