"""Benchmark problems from a JSONL file (or `-`, stdin; gzip-compressed too): one object a line with
`problem` and `answer` (and usually `id`), checked by the rule `data convert` writes by
(problem_rows.py). Lines are read by util/data_lines.py, the one reader for data: bytes that are not
UTF-8 become U+FFFD, so such a line is read, not a crash mid-run. Other formats (GSM8K's, MATH's):
`edgereason data convert` (search/formats.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ConfigError
from edgereason.search.problem_rows import row_fault
from edgereason.util.data_lines import data_lines
from edgereason.util.text import clean


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: str


def load_problems(path: str | Path, limit: int | None = None, offset: int = 0) -> list[Problem]:
    """Problems offset .. offset+limit of the file (`-`: stdin); bad lines fail with their line
    number, not mid-run."""
    path = Path(path)
    # a line's default id: the file's name without .jsonl (and .gz), and the line's number
    stem = Path(path.name.removesuffix(".gz")).stem
    name, stem = ("stdin", "stdin") if str(path) == "-" else (str(path), stem)
    if limit is not None and limit <= 0:
        raise ConfigError(f"--limit must be a positive number, got {limit}")
    if offset < 0:
        raise ConfigError(f"--offset must be >= 0, got {offset}")
    problems = _problems(path, name, stem)
    if not problems:  # an empty file, /dev/null, nothing on stdin
        raise ConfigError(
            f"{name} holds no problems; give a JSONL file, one {{problem, answer}} object a line"
        )
    selected = problems[offset : offset + limit if limit is not None else None]
    if not selected:
        raise ConfigError(
            f"no problems selected from {name} ({len(problems)} in the file, --offset {offset})"
        )
    return selected


def _problems(path: Path, name: str, stem: str) -> list[Problem]:
    """Every problem of the file, in order; ConfigError at the first bad line or an id met twice."""
    problems: list[Problem] = []
    first_line: dict[str, int] = {}  # each id's line: the duplicate check is one look-up a line
    for n, line in enumerate(data_lines(path), 1):
        if not line.strip():
            continue
        problem = _problem(line, f"{name}:{n}", f"{stem}-{n}")
        if problem.id in first_line:
            raise ConfigError(
                f"{name}: id {problem.id!r} appears twice (lines {first_line[problem.id]} and "
                f"{n}); request ids must be unique within a run"
            )
        first_line[problem.id] = n
        problems.append(problem)
    return problems


def _problem(line: str, where: str, default_id: str) -> Problem:
    """One line's problem; ConfigError naming `where` (file:line) for a line that is not one."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not a JSON object ({e.msg})") from None
    # an integer of over 4300 digits, arrays nested too deep
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{where}: not a JSON object that can be read ({e})") from None
    fault = row_fault(row)
    if fault is not None:
        raise ConfigError(f"{where}: {fault}")
    pid = row.get("id")
    values = (default_id if pid is None else pid, row["problem"], row["answer"])
    return Problem(*(clean(str(v)) for v in values))  # a "\udce9" escape is a lone surrogate
