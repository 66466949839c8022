"""Past problems and answers, one JSON object per line in $EDGEREASON_HOME/history.jsonl, so a
session's work survives the terminal closing and can be browsed (and re-asked) later."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from edgereason import models
from edgereason.engine.result import SearchResult
from edgereason.util.jsonl import append_line


@dataclass
class HistoryEntry:
    time: str
    problem: str
    answer: str | None
    status: str
    score: float | None = None
    steps: list[str] = field(default_factory=list)  # the best path's step texts
    model: str = ""
    policy: str = ""
    beams: int = 0
    width: int = 0
    tokens: int = 0
    wall_s: float = 0.0

    @classmethod
    def from_result(
        cls, result: SearchResult, model: str, policy: str, beams: int, width: int
    ) -> HistoryEntry:
        best = result.answer_path()
        return cls(
            time.strftime("%Y-%m-%d %H:%M:%S"),
            result.question,
            result.answer,
            result.status,
            best.score if best else None,
            [t for t, _ in best.steps] if best else [],
            model,
            policy,
            beams,
            width,
            result.metrics.generated_tokens,
            round(result.metrics.wall_s, 2),
        )


class History:
    """Appends are crash-safe and loads never fail on a bad line (rules on `append` and `read`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or models.home() / "history.jsonl"

    def append(self, entry: HistoryEntry) -> None:
        """Crash-safe: the rules of `edgereason.util.jsonl.append_line`."""
        append_line(self.path, asdict(entry))

    def load(self) -> list[HistoryEntry]:
        """Oldest first; see `read`."""
        return self.read()[0]

    def read(self) -> tuple[list[HistoryEntry], int]:
        """The entries, oldest first, and how many non-empty lines were skipped: a line cut by a
        crash (even inside a multi-byte character), one that is not a JSON object or whose fields
        have the wrong types (a newer format, a hand edit) is skipped and counted, never fatal."""
        if not self.path.is_file():
            return [], 0
        entries, skipped = [], 0
        for raw in self.path.read_bytes().split(b"\n"):
            if not raw.strip():
                continue
            try:
                entries.append(_parse_entry(raw))
            except (ValueError, TypeError):
                skipped += 1
        return entries, skipped


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "time": str,
    "problem": str,
    "answer": (str, type(None)),
    "status": str,
    "score": (int, float, type(None)),
    "steps": list,
    "model": str,
    "policy": str,
    "beams": int,
    "width": int,
    "tokens": int,
    "wall_s": (int, float),
}


def _parse_entry(raw: bytes) -> HistoryEntry:
    """One history line -> its entry; ValueError (UnicodeDecodeError, JSONDecodeError included) or
    TypeError unless it is a JSON object with every field the browser shows, of the type it shows.
    Unknown keys are ignored (a newer version may add some)."""
    obj = json.loads(raw.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    known = {f.name for f in fields(HistoryEntry)}
    entry = HistoryEntry(**{k: v for k, v in obj.items() if k in known})
    for name, kind in _FIELD_TYPES.items():
        if not isinstance(getattr(entry, name), kind):
            raise TypeError(f"history field {name!r} has the wrong type")
    if not all(isinstance(step, str) for step in entry.steps):
        raise TypeError("history steps must be strings")
    return entry
