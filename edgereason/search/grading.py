"""Final answers compared as math (math-verify): `18`, `18.0` and `$18` are one answer.

Grading is bounded (compare.py): one comparison waits at most COMPARE_S on any thread, and a
`Grader` (one search's vote and the figures shown with it) spends at most its budget on math; past
it, answers are compared as text, and its `note` says so, once. An answer longer than
MATH_MAX_CHARS is compared as text alone.
"""

from __future__ import annotations

import time

from edgereason.search.compare import math_match, start

COMPARE_S = 3.0  # one comparison as math; an answer math-verify cannot settle in this is no match
VOTE_BUDGET_S = 10.0  # math comparisons of one search's answers, in all
# math-verify's parser is far from linear (600 characters of nested parentheses took it 21 s, 20,000
# unclosed braces over 8 minutes) and its child caches what it parsed: a final answer longer
# than this is model text run on, which no comparison as math could settle within COMPARE_S
MATH_MAX_CHARS = 1000


def _normalize(answer: str) -> str:
    return answer.strip().strip("$").replace(" ", "").replace("\\!", "").rstrip(".").lower()


def answers_match(a: str | None, b: str | None) -> bool:
    """True when the two answers are the same mathematical object (as text where math-verify gives
    no answer within COMPARE_S)."""
    return Grader(budget_s=COMPARE_S).match(a, b)


class Grader:
    """Answers compared as math within a total budget of seconds; past it as text, said once in
    `note`. Not shared between threads (each search grades with its own)."""

    def __init__(self, budget_s: float = VOTE_BUDGET_S) -> None:
        self.budget_s = budget_s
        self.spent_s = 0.0
        self.note: str | None = None

    def match(self, a: str | None, b: str | None) -> bool:
        if a is None or b is None:
            return False
        if _normalize(a) == _normalize(b):
            return True
        if max(len(a), len(b)) > MATH_MAX_CHARS:  # not given to math-verify: no match (see above)
            return False
        left = self.budget_s - self.spent_s
        if left <= 0:
            self.note = self.note or (
                f"answers were compared as text after {self.budget_s:.0f} s of comparison as math "
                "(math-verify could not settle some in time)"
            )
            return False
        start()  # a first comparison's child starts apart from the budget
        t0 = time.monotonic()
        try:
            return bool(math_match(a, b, min(COMPARE_S, left)))
        finally:
            self.spent_s += time.monotonic() - t0
