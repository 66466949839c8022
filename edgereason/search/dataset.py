"""Benchmark problems from a JSONL file (or `-`, stdin): one object a line with `problem` and
`answer` (and usually `id`). Bytes that are not UTF-8 become U+FFFD (edgereason/util/text.py), so
such a line is read, not a crash mid-run. Other formats (GSM8K's, MATH's): `edgereason data convert`
(search/formats.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ConfigError
from edgereason.util.text import clean, read_stdin


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
    problems: list[Problem] = []
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{name}:{lineno}: not a JSON object ({e.msg})") from None
        except (ValueError, RecursionError) as e:  # an integer of over 4300 digits, arrays nested too deep
            raise ConfigError(f"{name}:{lineno}: not a JSON object that can be read ({e})") from None
        if not isinstance(row, dict) or not str(row.get("problem", "")).strip() or row.get("answer") is None:
            raise ConfigError(f"{name}:{lineno}: each line needs a non-empty 'problem' and an 'answer'")
        if (kind := _unwritable_kind(row["answer"])) is not None:
            raise ConfigError(f"{name}:{lineno}: 'answer' is {kind}; give one gold answer as a string or a number")
        pid = row.get("id")
        values = (f"{stem}-{lineno}" if pid is None else pid, row["problem"], row["answer"])
        problems.append(Problem(*(clean(str(v)) for v in values)))  # a "\udce9" escape is a lone surrogate
    ids = [p.id for p in problems]
    if len(set(ids)) < len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"{name}: id {dup!r} appears twice; request ids must be unique within a run")
    selected = problems[offset : offset + limit if limit is not None else None]
    if not selected:
        raise ConfigError(f"no problems selected from {name} ({len(problems)} in the file, --offset {offset})")
    return selected


def _unwritable_kind(answer: object) -> str | None:
    """The JSON kind of a gold answer that is neither a string nor a number, or None: the gold is compared as text,
    and the Python text of a list, an object or a bool ("['4', '5']", "True") is nothing a model writes."""
    if isinstance(answer, bool):
        return "true" if answer else "false"
    if isinstance(answer, list):
        return "a list"
    if isinstance(answer, dict):
        return "an object"
    return None


def _read_lines(path: Path) -> list[str]:
    if str(path) == "-":
        return read_stdin().splitlines()
    if path.is_dir():
        raise ConfigError(f"dataset {path} is a folder; give a JSONL file")
    if not path.is_file():
        raise ConfigError(f"dataset file not found: {path}")
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as f:  # -sig: a file saved with a byte-order mark
            return f.readlines()
    except OSError as e:
        raise ConfigError(f"cannot read dataset {path}: {e.strerror}; check its permissions") from None
