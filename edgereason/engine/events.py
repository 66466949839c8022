"""What the engine tells its listeners (UI, bench recorder, JSON writer). Plain immutable records: a
listener on another thread can keep them as they are."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from edgereason.tree import Node, Status


class NodeAdded(NamedTuple):
    request_id: str
    node_id: int
    parent_id: int | None
    depth: int
    potential: int
    speculative: bool


class NodeExtended(NamedTuple):
    """A node's step text grew; `text` is the whole step so far (cheap to apply, no ordering
    hazards)."""

    request_id: str
    node_id: int
    text: str
    n_tokens: int


class StepFinished(NamedTuple):
    request_id: str
    node_id: int
    finish: str  # step | eos | answer | length | max_steps


class NodeScored(NamedTuple):
    request_id: str
    node_id: int
    score: float


class NodeSelected(NamedTuple):
    request_id: str
    node_id: int
    times: int  # logical candidates kept at this node


class NodeStatus(NamedTuple):
    """A node's status changed (tree.Status values; every change, complete included, so a listener
    mirrors the engine's statuses without rebuilding its rules). A node starts `generating`, or
    `speculative` when NodeAdded says so; the root starts as `prefill`."""

    request_id: str
    node_id: int
    status: str
    rule: str | None = None  # why it was pruned: selection | rank | perfect | done | cancelled


class Progress(NamedTuple):
    """Once per engine step, and once as a request finishes (its totals, its KV freed): what a
    status bar shows."""

    request_id: str
    generated_tokens: int
    elapsed_s: float
    prm_calls: int
    generator_kv_used: int
    generator_kv_capacity: int
    verifier_kv_used: int
    verifier_kv_capacity: int
    spec_tokens_reused: int
    # finished paths, each counted by its potential (the search stops at `beams`)
    completed_paths: int = 0


class RequestDone(NamedTuple):
    request_id: str
    result: object  # edgereason.engine.result.SearchResult


Event = (
    NodeAdded
    | NodeExtended
    | StepFinished
    | NodeScored
    | NodeSelected
    | NodeStatus
    | Progress
    | RequestDone
)
Listener = Callable[[Event], None]


class Emitter:
    """The engine's one way out to its listener, and the one place a node's status changes: every
    change is an event."""

    def __init__(self, listener: Listener | None) -> None:
        self.listener = listener

    def __call__(self, event: Event) -> None:
        if self.listener is not None:
            self.listener(event)

    def status(self, request_id: str, node: Node, status: Status, rule: str | None = None) -> None:
        if node.status is not status:
            node.status = status
            self(NodeStatus(request_id, node.id, status.value, rule))
