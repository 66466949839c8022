"""Past problems and answers, one JSON object per line in $EDGEREASON_HOME/history.jsonl, so a session's work
survives the terminal closing and can be browsed (and re-asked) later."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from edgereason import models
from edgereason.result import SearchResult


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
    def from_result(cls, result: SearchResult, model: str, policy: str, beams: int, width: int) -> "HistoryEntry":
        best = result.paths[0] if result.paths else None
        return cls(time.strftime("%Y-%m-%d %H:%M:%S"), result.question, result.answer, result.status,
                   best.score if best else None, [t for t, _ in best.steps] if best else [], model, policy,
                   beams, width, result.metrics.generated_tokens, round(result.metrics.wall_s, 2))


class History:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or models.home() / "history.jsonl"

    def append(self, entry: HistoryEntry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(entry), ensure_ascii=False) + "\n")

    def load(self) -> list[HistoryEntry]:
        """Oldest first; lines that do not parse (a crash mid-write, a newer format) are skipped, not fatal."""
        if not self.path.is_file():
            return []
        known = {f.name for f in fields(HistoryEntry)}
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                entries.append(HistoryEntry(**{k: v for k, v in raw.items() if k in known}))
            except (ValueError, TypeError):
                continue
        return entries
