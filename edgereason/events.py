"""What the engine tells its listeners (UI, bench recorder, JSON writer). Plain immutable records: a listener on
another thread can keep them as they are."""

from __future__ import annotations

from typing import NamedTuple, Union


class NodeAdded(NamedTuple):
    request_id: str
    node_id: int
    parent_id: int | None
    depth: int
    potential: int
    speculative: bool


class NodeExtended(NamedTuple):
    """A node's step text grew; `text` is the whole step so far (cheap to apply, no ordering hazards)."""

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


class NodeConfirmed(NamedTuple):
    """A speculative node's parent was selected: the node is now a standard candidate."""

    request_id: str
    node_id: int


class NodePruned(NamedTuple):
    request_id: str
    node_id: int
    rule: str  # selection | rank | perfect | parent | done | cancelled


class Progress(NamedTuple):
    """Once per engine step: what a status bar shows."""

    request_id: str
    generated_tokens: int
    elapsed_s: float
    prm_calls: int
    generator_kv_used: int
    generator_kv_capacity: int
    verifier_kv_used: int
    verifier_kv_capacity: int
    spec_tokens_reused: int


class RequestDone(NamedTuple):
    request_id: str
    result: object  # edgereason.result.SearchResult


Event = Union[NodeAdded, NodeExtended, StepFinished, NodeScored, NodeSelected, NodeConfirmed, NodePruned,
              Progress, RequestDone]
