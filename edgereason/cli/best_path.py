"""The best path of a search so far, from the engine's events: what solve's status shows on a
terminal under its line, growing as the search goes."""

from __future__ import annotations

from edgereason.engine.events import Event, NodeAdded, NodeExtended, NodeScored, NodeStatus
from edgereason.util.terminal import safe_text


class BestPath:
    """The highest-scored tip: a scored step that is not pruned and none of whose children is
    scored yet (a scored child is further along the same path)."""

    def __init__(self) -> None:
        self._parent: dict[int, int | None] = {}
        self._text: dict[int, str] = {}
        self._score: dict[int, float] = {}
        self._passed: set[int] = set()  # scored nodes with a scored child, or pruned

    def __call__(self, event: Event) -> None:
        if isinstance(event, NodeAdded):
            self._parent[event.node_id] = event.parent_id
        elif isinstance(event, NodeExtended):
            self._text[event.node_id] = event.text
        elif isinstance(event, NodeScored):
            self._score[event.node_id] = event.score
            parent = self._parent.get(event.node_id)
            if parent is not None:
                self._passed.add(parent)
        elif isinstance(event, NodeStatus) and event.status == "pruned":
            self._passed.add(event.node_id)

    def tip(self) -> int | None:
        tips = [n for n in self._score if n not in self._passed]
        return max(tips, key=lambda n: self._score[n], default=None)

    def line(self, width: int) -> str:
        """`best 0.82: ...the path's last words`, at most `width` characters; "" before a score."""
        tip = self.tip()
        if tip is None:
            return ""
        steps: list[str] = []
        node: int | None = tip
        while node is not None:
            steps.append(self._text.get(node, "").strip())
            node = self._parent.get(node)
        text = safe_text(" ".join(s for s in reversed(steps) if s).replace("\n", " "), True)
        head = f"best {self._score[tip]:.2f}: "
        room = max(8, width - len(head))
        # the end of the path is what grows: show its last words
        return head + (text if len(text) <= room else "…" + text[-(room - 1) :])
