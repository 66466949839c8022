"""Bounded grading (issue 55, item 3): a comparison as math has a deadline on any thread, one
search's vote a budget after which it compares as text and says so once, and nothing math-verify
prints reaches the terminal."""

from __future__ import annotations

import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from edgereason.engine.result import FinalPath, vote
from edgereason.search import compare
from edgereason.search.grading import COMPARE_S, MATH_MAX_CHARS, Grader, answers_match

TOWER = "2^{2^{2^{2^{2^{2}}}}}"  # math-verify ran each comparison of it to its 5 s timeout
SLACK_S = 1.5  # the pipe, the kill and a new child, on a loaded machine


def test_answers_still_compare_as_math() -> None:
    assert (
        answers_match("18", "18.0")
        and answers_match("\\frac{1}{2}", "0.5")
        and answers_match("$18$", "18")
    )
    assert not answers_match("3", "4") and not answers_match(None, "4")


def test_a_power_tower_in_a_worker_thread_returns_within_its_deadline(capfd) -> None:
    """Off the main thread math-verify applied no timeout at all (it uses SIGALRM): the chat's
    grading of such an answer never returned."""
    assert compare.start()  # the child's start is not part of a comparison's deadline
    got: list[tuple[bool, float]] = []

    def grade() -> None:
        t0 = time.monotonic()
        got.append((answers_match(TOWER, "18"), time.monotonic() - t0))

    worker = threading.Thread(target=grade)
    worker.start()
    worker.join(COMPARE_S + SLACK_S + 5)
    assert not worker.is_alive(), "the comparison did not return"
    ((match, took),) = got
    assert match is False and took < COMPARE_S + SLACK_S, took
    assert answers_match("7", "7.0")  # the next comparison has a child again
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no "Timeout during comparison"


def test_a_vote_spends_its_budget_then_compares_as_text_and_says_so_once() -> None:
    """8 paths of such answers took a 1 s search to 177 s; the budget bounds the vote."""
    compare.start()
    answers = [TOWER] + [str(10 + i) for i in range(7)]  # each compared with the tower first
    towers = [FinalPath([], 1.0 - i / 10, answer, i) for i, answer in enumerate(answers)]
    grader = Grader(budget_s=4.0)
    t0 = time.monotonic()
    answer = vote(towers, grader=grader)
    took = time.monotonic() - t0
    assert answer == towers[0].answer  # no two alike as text: the best-ranked path's
    assert took < grader.budget_s + COMPARE_S + SLACK_S, took
    assert grader.note is not None and "compared as text after 4 s" in grader.note
    note = grader.note
    assert grader.match("5", "5.0") is False and grader.note == note  # as text now, said once
    assert grader.match("5", " 5 ") is True  # equal as text still matches


@settings(max_examples=50, deadline=None)
@given(
    st.text(
        st.characters(blacklist_characters="18", blacklist_categories=["Cs"]),
        min_size=MATH_MAX_CHARS + 1,
        max_size=4 * MATH_MAX_CHARS,
    )
)
def test_an_answer_longer_than_any_is_no_match_and_never_reaches_math_verify(answer: str) -> None:
    """math-verify's parser is far from linear: such an answer costs no comparison time."""
    grader = Grader()
    assert grader.match(answer, "18") is False and grader.match("18", answer) is False
    assert grader.spent_s == 0.0
    assert grader.match(answer, f" {answer} ") is True  # the same text is still the same answer


def test_a_short_answer_math_verify_parses_slowly_is_no_match_within_its_deadline() -> None:
    """600 characters of nested parentheses took math-verify 21 s to parse."""
    compare.start()
    nested = "(" * 300 + "1" + ")" * 300
    t0 = time.monotonic()
    assert answers_match(nested, "18") is False
    assert time.monotonic() - t0 < COMPARE_S + SLACK_S
