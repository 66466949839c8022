"""Benchmark problems from a JSONL file (or `-`, stdin): one object a line with `problem` and
`answer` (and usually `id`). Bytes that are not UTF-8 become U+FFFD (edgereason/util/text.py), so
such a line is read, not a crash mid-run. Other formats (GSM8K's, MATH's): `edgereason data convert`
(search/formats.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ConfigError
from edgereason.util.text import blank_problem, clean, read_stdin


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: str


def load_problems(path: str | Path, limit: int | None = None, offset: int = 0) -> list[Problem]:
    """Problems offset .. offset+limit of the file (`-`: stdin); bad lines fail with their line
    number, not mid-run."""
    path = Path(path)
    name, stem = ("stdin", "stdin") if str(path) == "-" else (str(path), path.stem)
    if limit is not None and limit <= 0:
        raise ConfigError(f"--limit must be a positive number, got {limit}")
    if offset < 0:
        raise ConfigError(f"--offset must be >= 0, got {offset}")
    lines = enumerate(_read_lines(path), 1)
    problems = [_problem(line, f"{name}:{n}", f"{stem}-{n}") for n, line in lines if line.strip()]
    ids = [p.id for p in problems]
    if len(set(ids)) < len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(
            f"{name}: id {dup!r} appears twice; request ids must be unique within a run"
        )
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


def _problem(line: str, where: str, default_id: str) -> Problem:
    """One line's problem; ConfigError naming `where` (file:line) for a line that is not one."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not a JSON object ({e.msg})") from None
    # an integer of over 4300 digits, arrays nested too deep
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{where}: not a JSON object that can be read ({e})") from None
    if (
        not isinstance(row, dict)
        or not str(row.get("problem", "")).strip()
        or row.get("answer") is None
    ):
        raise ConfigError(f"{where}: each line needs a non-empty 'problem' and an 'answer'")
    _check_kinds(row, where)
    pid = row.get("id")
    values = (default_id if pid is None else pid, row["problem"], row["answer"])
    return Problem(*(clean(str(v)) for v in values))  # a "\udce9" escape is a lone surrogate


def _check_kinds(row: dict, where: str) -> None:
    """A problem is text, a gold answer text or a finite number, an id text or a whole number: the
    Python text of anything else ("['a']", "True", "nan") was sent to the model as the problem, or
    compared as the gold, without a word."""
    if not isinstance(row["problem"], str):
        kind = _kind(row["problem"])
        raise ConfigError(f"{where}: 'problem' is {kind}; give the problem as a string")
    if why := blank_problem(row["problem"]):  # zero-width spaces alone pass the check for empty
        raise ConfigError(f"{where}: {why}; give the problem's text")
    if (kind := _kind(row["answer"])) not in ("text", "a number"):
        raise ConfigError(
            f"{where}: 'answer' is {kind}; give one gold answer as a string or a number"
        )
    if "id" in row and row["id"] is not None and _kind(row["id"]) not in ("text", "a number"):
        raise ConfigError(
            f"{where}: 'id' is {_kind(row['id'])}; give the id as a string or a number"
        )


def _kind(value: object) -> str:
    """A JSON value's kind as an error names it; "text" and "a number" are the ones a field may
    be."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    # JSON's NaN and Infinity, as Python reads them
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "infinite"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object"


def _read_lines(path: Path) -> list[str]:
    """The file's lines; "-" is stdin, and a device or a pipe (/dev/null, <(...)) is read as a file
    is."""
    if str(path) == "-":
        return read_stdin().splitlines()
    if path.is_dir():
        raise ConfigError(f"dataset {path} is a folder; give a JSONL file")
    if not path.exists():
        raise ConfigError(f"dataset file not found: {path}")
    try:
        # -sig: a file saved with a byte-order mark
        with path.open(encoding="utf-8-sig", errors="replace") as f:
            return f.readlines()
    except OSError as e:
        raise ConfigError(
            f"cannot read dataset {path}: {e.strerror}; check its permissions"
        ) from None
