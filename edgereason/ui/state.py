"""The UI's copy of one search tree, mirrored from engine events only (the engine's own tree lives
in the worker thread and is not safe to read from the UI). Statuses come from NodeStatus events as
they are: the UI does not re-derive them."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgereason.engine.events import (
    Event,
    NodeAdded,
    NodeExtended,
    NodeScored,
    NodeStatus,
    RequestDone,
    StepFinished,
)
from edgereason.engine.result import SearchResult


@dataclass
class StepView:
    id: int
    parent: int | None
    depth: int
    status: str
    text: str = ""
    n_tokens: int = 0
    score: float | None = None
    finish: str | None = None
    prune_rule: str | None = None
    children: list[int] = field(default_factory=list)

    @property
    def path_complete(self) -> bool:
        return self.finish not in (None, "step")


class SearchState:
    """One request as the UI sees it. `apply` returns the ids whose line in the tree changed."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.nodes: dict[int, StepView] = {}
        self.root: int | None = None
        # the node that grew last: what the detail pane follows by default
        self.latest: int | None = None
        self.result: SearchResult | None = None

    def apply(self, event: Event) -> list[int]:
        if isinstance(event, NodeAdded):
            return self._add(event)
        node = self.nodes.get(getattr(event, "node_id", -1))
        if isinstance(event, RequestDone):
            return self._done(event.result)
        if node is None:
            return []
        if isinstance(event, NodeExtended):
            node.text, node.n_tokens = event.text, event.n_tokens
            self.latest = node.id
            # text streams into the detail pane; the tree line changes on step events only
            return []
        if isinstance(event, StepFinished):
            node.finish = event.finish
        elif isinstance(event, NodeScored):
            node.score = event.score
        elif isinstance(event, NodeStatus):
            node.status, node.prune_rule = event.status, event.rule
        else:
            return []
        return [node.id]

    def _add(self, e: NodeAdded) -> list[int]:
        status = (
            "prefill" if e.parent_id is None else ("speculative" if e.speculative else "generating")
        )
        self.nodes[e.node_id] = StepView(e.node_id, e.parent_id, e.depth, status)
        if e.parent_id is None:
            self.root = e.node_id
        elif e.parent_id in self.nodes:
            self.nodes[e.parent_id].children.append(e.node_id)
        return [e.node_id]

    def _done(self, result: SearchResult) -> list[int]:
        """The result's tree is authoritative: adopt its final statuses and scores."""
        self.result = result
        changed = []
        for row in result.tree:
            node = self.nodes.get(row["id"])
            if node is not None and (node.status, node.score) != (row["status"], row["score"]):
                node.status, node.score = row["status"], row["score"]
                changed.append(node.id)
        return changed

    def path(self, node_id: int | None) -> list[StepView]:
        """Steps from the first one down to `node_id` (the root holds the prompt, not a step)."""
        steps = []
        while node_id is not None and node_id in self.nodes:
            node = self.nodes[node_id]
            if node.depth > 0:
                steps.append(node)
            node_id = node.parent
        return steps[::-1]

    def best_leaf(self) -> int | None:
        """Once done, the best path to the answer; while running, the highest-scored step among the
        deepest scored ones."""
        if self.result is not None:
            best = self.result.answer_path()
            return best.node_id if best else None
        scored = [n for n in self.nodes.values() if n.score is not None and n.status != "pruned"]
        if not scored:
            return None
        return max(scored, key=lambda n: (n.depth, n.score)).id

    def best_path(self) -> set[int]:
        return {n.id for n in self.path(self.best_leaf())}
