"""Problem sets in their publishers' formats made EdgeReason's (`edgereason data convert`): one JSON
object a line with `id`, `problem`, `answer` (the gold final answer), `solution`, `source`.

- GSM8K (openai/grade-school-math, and its Hugging Face copy): `question`, and `answer` holding the
  worked solution with `<<a*b=c>>` calculator notes and a last line `#### N`; N is the gold answer.
- MATH (hendrycks/math, MATH-500): `problem`, and `solution` whose last `\\boxed{...}` (or
  `\\fbox{...}`) is the gold answer; a record that has an `answer` of its own (MATH-500) keeps it.
- EdgeReason's own (`problem` and `answer`): kept as it is.

A record that is none of these, or whose answer cannot be found, is skipped with a reason, never
guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from edgereason.search.problem_rows import row_fault
from edgereason.util.braces import extract_boxed
from edgereason.util.text import clean

FORMATS = ("auto", "gsm8k", "math", "edgereason")
GSM8K_MARK = "####"
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
KEPT = ("level", "subject", "type")  # MATH's labels, kept beside the five fields


@dataclass(frozen=True)
class Skipped:
    line: int
    reason: str


def detect(row: dict) -> str | None:
    """Which format a record is in, or None."""
    if isinstance(row.get("question"), str) and isinstance(row.get("answer"), str):
        return "gsm8k"
    if isinstance(row.get("problem"), str) and row.get("answer") is not None:
        return "edgereason"
    if isinstance(row.get("problem"), str) and isinstance(row.get("solution"), str):
        return "math"
    return None


def convert(row: dict, fmt: str, line: int) -> dict:
    """The record in EdgeReason's format; ValueError says why it cannot be (problem_rows.py's rule,
    which bench reads by)."""
    found = detect(row)
    if found is None:
        raise ValueError("neither GSM8K's question/answer ('#### N') nor MATH's problem/solution")
    if fmt != "auto" and found != fmt and not (fmt == "math" and found == "edgereason"):
        raise ValueError(f"a {found} record, not {fmt} (--format auto reads each as what it is)")
    out = _gsm8k(row) if found == "gsm8k" else _math(row) if found == "math" else _own(row)
    pid = row.get("id", row.get("unique_id"))
    out = {"id": f"{out['source']}-{line}" if pid is None else pid, **out}
    fault = row_fault(out)
    if fault is not None:
        raise ValueError(fault)
    out["answer"] = str(out["answer"])  # a number's JSON text, as bench reads it
    out.update({k: row[k] for k in KEPT if k in row})
    return {k: clean(v) if isinstance(v, str) else v for k, v in out.items()}


def _gsm8k(row: dict) -> dict:
    worked = row["answer"]
    mark = _gsm8k_mark(worked)
    if mark is None:
        raise ValueError("'answer' has no last line '#### N'")
    answer = worked[mark + len(GSM8K_MARK) :].strip()
    return {
        "problem": row["question"],
        "answer": THOUSANDS.sub("", answer),
        "solution": worked[:mark].strip(),
        "source": "gsm8k",
    }


def _gsm8k_mark(worked: str) -> int | None:
    """Where the `####` of the last line `#### N` starts (N may stand on a line of its own under a
    `####` that ends the line above), or None. Found by position, not by a regex that
    backtracks: one of those took a minute over 5 KB of spaces after a `####`."""
    body = worked.rstrip()
    last_line = body.rfind("\n") + 1
    above = body[:last_line].rstrip()
    if above.endswith(GSM8K_MARK):
        return len(above) - len(GSM8K_MARK)
    mark = body.find(GSM8K_MARK, last_line)
    return None if mark == -1 else mark


def _math(row: dict) -> dict:
    answer = extract_boxed(row["solution"].replace("\\fbox{", "\\boxed{"))
    if answer is None:
        raise ValueError("'solution' has no \\boxed{...} answer")
    return {
        "problem": row["problem"],
        "answer": answer,
        "solution": row["solution"],
        "source": "math",
    }


def _own(row: dict) -> dict:
    source = row.get("source")
    # a blank source, or one that is not text, is none: data convert names the sources it wrote
    named = isinstance(source, str) and source.strip()
    return {
        "problem": row["problem"],
        "answer": row["answer"],
        "solution": row.get("solution", ""),
        "source": source if named else "edgereason",
    }


def convert_lines(lines: Iterable[str], fmt: str = "auto") -> Iterator[dict | Skipped]:
    """Each non-blank line's record in EdgeReason's format, or Skipped (its line number and why); an
    id seen before is skipped too (bench and train-prm refuse a set with one twice)."""
    seen: set[str] = set()
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except (ValueError, RecursionError) as e:
            yield Skipped(n, f"not JSON ({getattr(e, 'msg', e)})")
            continue
        if not isinstance(row, dict):
            yield Skipped(n, "not a JSON object")
            continue
        try:
            out = convert(row, fmt, n)
        except ValueError as e:
            yield Skipped(n, str(e))
            continue
        if str(out["id"]) in seen:
            yield Skipped(n, f"id {out['id']!r} appears before")
            continue
        seen.add(str(out["id"]))
        yield out
