"""Past problems and answers, one JSON object per line in $EDGEREASON_HOME/history.jsonl, so a
session's work survives the terminal closing and can be browsed (and re-asked) later."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import cast

from edgereason import models
from edgereason.engine.result import SearchResult
from edgereason.util.jsonl import append_line
from edgereason.util.schema import TEXT, Fields, ListOf, Maybe, Number, Wrong, parse_json


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

    def read(self) -> tuple[list[HistoryEntry], list[str]]:
        """The entries, oldest first, and each non-empty line skipped, named by its number and what
        is wrong with it: a line cut by a crash (even inside a multi-byte character), one that is
        not a JSON object or whose fields have the wrong types (a newer format, a hand edit) is
        skipped, never fatal."""
        if not self.path.is_file():
            return [], []
        entries, skipped = [], []
        for number, raw in enumerate(self.path.read_bytes().split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                entries.append(_parse_entry(raw))
            except Wrong as e:
                skipped.append(f"line {number} ({e})")
        return entries, skipped


# what the browser shows of an entry; fields it does not name are ignored (a newer version may
# add some), and those missing take HistoryEntry's defaults
_ENTRY = Fields(
    {"time": TEXT, "problem": TEXT, "answer": Maybe(TEXT), "status": TEXT},
    {
        "score": Maybe(Number()),
        "steps": ListOf(TEXT),
        "model": TEXT,
        "policy": TEXT,
        "beams": Number(whole=True, least=0),
        "width": Number(whole=True, least=0),
        "tokens": Number(whole=True, least=0),
        "wall_s": Number(least=0),
    },
)


def _parse_entry(raw: bytes) -> HistoryEntry:
    """One history line -> its entry; Wrong unless it is a JSON object that fits _ENTRY."""
    obj = parse_json(raw)
    _ENTRY.check(obj, "")
    known = {f.name for f in fields(HistoryEntry)}
    return HistoryEntry(**{k: v for k, v in cast(dict, obj).items() if k in known})
