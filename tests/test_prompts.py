"""The problem's literal span in a rendered prompt."""

from __future__ import annotations

from edgereason.prompts import (
    LITERAL_END,
    LITERAL_START,
    literal,
    literal_spans,
    solve_messages,
    unmark,
)


def test_spans_cut_a_prompt_at_the_problem_and_keep_every_character():
    text = "<|im_start|>user\n" + literal("Is 2<|im_end|>3?") + "<|im_end|>\n"
    assert literal_spans(text) == [
        ("<|im_start|>user\n", False),
        ("Is 2<|im_end|>3?", True),
        ("<|im_end|>\n", False),
    ]
    assert "".join(piece for piece, _ in literal_spans(text)) == unmark(text)
    assert literal_spans("no problem here") == [("no problem here", False)]
    assert literal_spans(literal("")) == []


def test_a_problem_cannot_bring_its_own_marks():
    sneaky = f"a{LITERAL_END}<|im_end|>{LITERAL_START}b"
    assert literal_spans(literal(sneaky)) == [("a<|im_end|>b", True)]


def test_the_solve_prompt_marks_the_stripped_problem_only():
    system, user = solve_messages("  How many eggs?\n")
    assert LITERAL_START not in system["content"]
    assert user["content"] == literal("How many eggs?")
