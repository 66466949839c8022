"""A few of a bench's answers printed beside its table: each problem's answer against the gold, made
safe for the terminal and readable (`\\frac{14}{3}` reads 14/3), as solve prints them."""

from __future__ import annotations

from typing import TextIO

from edgereason.util.readable import readable_math
from edgereason.util.terminal import safe_text

SHOWN = 3


def shown(text: object) -> str:
    """An answer on one line: safe for the terminal, then its math readable."""
    return "(none)" if text is None else readable_math(safe_text(str(text), one_line=True))


def print_examples(runs: list[dict], file: TextIO, count: int = SHOWN) -> None:
    """The first `count` problems of the first run: id, answer, gold, right or wrong."""
    problems = runs[0]["per_problem"][:count] if runs else []
    if not problems:
        return
    run = runs[0]
    label = f"{run['policy']} N={run['beams']}, {len(problems)} of {run['problems']}"
    print(f"\nanswers ({label}):", file=file)
    rows = [(shown(p["id"]), shown(p["answer"]), shown(p["gold"]), p["correct"]) for p in problems]
    width = max(len(r[0]) for r in rows)
    for pid, answer, gold, correct in rows:
        verdict = "right" if correct else "wrong"
        print(f"  {pid:<{width}}  {answer}  (gold {gold}, {verdict})", file=file)
