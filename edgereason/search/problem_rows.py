"""What one record of a problem set holds: one rule for what `data convert` writes (formats.py) and
what bench and train-prm read (dataset.py), so that a set convert wrote is never refused later.

- `problem`: text, not blank.
- `answer`: the gold final answer, text (not blank) or a finite number. Not NaN or Infinity
  (Python's json reads them; they were stored as "nan" and "inf"), a list, an object, true/false or
  null: their Python text was compared as the gold without a word.
- `id` (optional; missing or null: the file's name and line): text or a whole number, not true or
  false.
"""

from __future__ import annotations

import math

from edgereason.util.text import blank_problem


def row_fault(row: object) -> str | None:
    """Why `row` is not a problem record (one line, saying what to give), or None when it is."""
    if not isinstance(row, dict):
        return "not a JSON object"
    if row.get("problem") is None or row.get("answer") is None:
        return "each line needs a non-empty 'problem' and an 'answer'"
    problem, answer, pid = row["problem"], row["answer"], row.get("id")
    if not isinstance(problem, str):
        return f"'problem' is {kind(problem)}; give the problem as a string"
    if not problem.strip():
        return "'problem' is empty; give the problem's text"
    if why := blank_problem(problem):  # zero-width spaces alone pass the check for empty
        return f"{why}; give the problem's text"
    if kind(answer) not in ("text", "a number", "a decimal number"):
        return f"'answer' is {kind(answer)}; give one gold answer as a string or a number"
    if isinstance(answer, str) and not answer.strip():
        return "'answer' is empty; give the gold final answer"
    if pid is not None and kind(pid) not in ("text", "a number"):
        return f"'id' is {kind(pid)}; give the id as a string or a whole number"
    return None


def kind(value: object) -> str:
    """A JSON value's kind as an error names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # JSON's NaN and Infinity, as Python reads them
        if not math.isfinite(value):
            return "NaN" if math.isnan(value) else "infinite"
        return "a decimal number"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object"
