"""bench's printed answers: readable, safe for the terminal, against the gold."""

from __future__ import annotations

import io
import re

from edgereason.evaluation.examples import print_examples


def run(per_problem: list[dict]) -> dict:
    return {
        "policy": "baseline",
        "beams": 4,
        "problems": len(per_problem),
        "per_problem": per_problem,
    }


def test_answers_print_readable_and_safe_beside_the_gold() -> None:
    # MATH-500 golds (test/algebra/2584, test/algebra/2036) and what a model might box
    per_problem = [
        {"id": "math-1", "answer": "\\dfrac{14}{3}", "gold": "\\frac{14}{3}", "correct": True},
        {"id": "math-2", "answer": "\\sqrt{117}\x1b[2J", "gold": "3\\sqrt{13}", "correct": False},
        {"id": "math-3", "answer": None, "gold": "-50", "correct": False},
        {"id": "math-4", "answer": "1", "gold": "1", "correct": True},
    ]
    out = io.StringIO()
    print_examples([run(per_problem)], out)
    lines = out.getvalue().splitlines()
    assert lines[1] == "answers (baseline N=4, 3 of 4):"
    assert lines[2:] == [
        "  math-1  14/3  (gold 14/3, right)",
        "  math-2  √117\\x1b[2J  (gold 3√13, wrong)",
        "  math-3  (none)  (gold -50, wrong)",
    ]
    assert not re.search(r"\\[A-Za-z]{2,}", out.getvalue()) and "\x1b" not in out.getvalue()


def test_no_run_prints_nothing() -> None:
    out = io.StringIO()
    print_examples([], out)
    assert out.getvalue() == ""


def test_an_answer_nested_too_deep_prints_as_written() -> None:
    """It ended bench in "unexpected RecursionError" (exit 1) after its table."""
    deep = "\\frac{" * 500 + "1" + "}{2}" * 500
    out = io.StringIO()
    print_examples([run([{"id": "p", "answer": deep, "gold": "1", "correct": False}])], out)
    assert out.getvalue().splitlines()[2] == f"  p  {deep}  (gold 1, wrong)"
