"""The search tree: one node per reasoning step; a path is root -> node. The root holds the prompt.

Every part of the engine (scheduler, verification, selection, events, UI) shares these `Node`
objects. A node's generator sequence holds the KV of the prompt and of every token of its path
except `pending`, the last sampled token, which the next forward pass feeds."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from edgereason.config import STEP_END
from edgereason.protocols import SeqId
from edgereason.util.braces import last_boxed_span


class Status(StrEnum):
    PREFILL = "prefill"  # the root while its prompt is evaluated
    GENERATING = "generating"  # decoding its step
    SPECULATIVE = "speculative"  # decoding while its parent is not selected yet
    WAITING = "waiting"  # step finished, not scored yet
    VERIFIED = "verified"  # scored, waiting for selection
    SELECTED = "selected"  # survived selection; its children carry on
    PRUNED = "pruned"
    COMPLETE = "complete"  # the path is finished (EOS, a boxed answer, a limit)


FinishReason = str  # "step" | "eos" | "answer" | "length" | "max_steps"
# How a finished path ended, in words for users (solve's summary and tree).
FINISH_WORDS: dict[FinishReason, str] = {
    "answer": "boxed answer",
    "eos": "end of text",
    "max_steps": "stopped at --max-steps",
    "length": "stopped at a token limit",
}


class SeqHolders:
    """How many nodes of one tree hold a generator sequence: the scheduler asks every pass."""

    def __init__(self) -> None:
        self.count = 0


@dataclass(eq=False)
class Node:
    id: int
    parent: Node | None
    depth: int  # 0: the root (prompt); k: the k-th reasoning step
    potential: int = 1  # how many logical candidates this node stands for (deduplication)
    times_selected: int = 0  # logical candidates of this node a selection kept
    speculative: bool = False
    status: Status = Status.GENERATING
    tokens: list[int] = field(default_factory=list)  # the step's tokens, EOS excluded
    # the step's bytes (tokens may split UTF-8 characters)
    raw: bytearray = field(default_factory=bytearray)
    pending: int | None = None  # sampled, not yet fed to the generator
    _seq: SeqId | None = field(default=None, repr=False)  # read and set as `seq`
    score: float | None = None
    finish: FinishReason | None = None  # set when the step ended
    children: list[Node] = field(default_factory=list)
    group: int | None = None  # selection group id
    created_at: float = field(default_factory=time.perf_counter)
    finished_at: float | None = None  # when the step ended
    waiting_s: float = 0.0  # step ended -> continued or pruned
    base: int = 0  # KV length of the path before this step's first token
    offset: int = 0  # generated tokens on the path before this step
    # (group id or None, draws): children to sample from this node's next-token distribution
    plan: list[tuple[int | None, int]] | None = None
    plan_speculative: bool = False
    # the verifier holds this node's path (or a longer one) under this key
    prm_key: str | None = None
    waited: bool = False  # waiting_s is final
    # its KV suffix was freed for room; rebuilt from a relative's prefix when it runs
    evicted: bool = False
    last_run: int = 0  # engine step that last fed it (least-recently-used eviction)
    seed: int = 0  # random stream of this node, derived from its place in the tree, not from timing
    # the ids from the root to this node: the scheduler's prefix order, built once at creation
    lineage: tuple[int, ...] = ()
    # its tree's count of nodes that hold a sequence, kept by `seq`'s setter
    holders: SeqHolders | None = field(default=None, repr=False)

    @property
    def seq(self) -> SeqId | None:
        """The generator sequence that holds this node's path, if any."""
        return self._seq

    @seq.setter
    def seq(self, seq: SeqId | None) -> None:
        if self.holders is not None:
            self.holders.count += (seq is not None) - (self._seq is not None)
        self._seq = seq

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    @property
    def step_done(self) -> bool:
        return self.finish is not None

    @property
    def path_complete(self) -> bool:
        return self.finish not in (None, "step")

    @property
    def alive(self) -> bool:
        return self.status is not Status.PRUNED

    def path(self) -> list[Node]:
        """Step nodes from depth 1 to this node."""
        nodes: list[Node] = []
        node: Node | None = self
        while node is not None and node.depth > 0:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def path_scores(self) -> list[float]:
        return [n.score for n in self.path() if n.score is not None]

    def subtree(self) -> Iterator[Node]:
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children)

    def step_ended_by(self, piece: bytes) -> bool:
        """True when appending `piece` made the step text contain the step separator."""
        tail = bytes(self.raw[-(len(STEP_END) + len(piece)) :])
        return STEP_END in tail


def has_boxed_answer(text: str) -> bool:
    """A complete `\\boxed{...}` (balanced braces) occurs in text."""
    return last_boxed_span(text) is not None


def aggregate(scores: list[float], how: str) -> float:
    if not scores:
        return 0.0
    if how == "last":
        return scores[-1]
    if how == "min":
        return min(scores)
    if how == "prod":
        return math.prod(scores)
    if how == "mean":
        return sum(scores) / len(scores)
    raise ValueError(f"unknown aggregation {how!r}")


def path_score(node: Node, how: str) -> float:
    return aggregate(node.path_scores(), how)


def ranked(nodes: list[Node], how: str) -> list[Node]:
    """Best first; ties go to the older node so selection is deterministic."""
    return sorted(nodes, key=lambda n: (-path_score(n, how), n.id))


class Tree:
    """Owns the nodes of one request; ids are unique within the tree. `frontier` holds every step
    node that may still run (a new node, or one given a plan: `touch`), and may hold some that no
    longer can; the scheduler drops those as it reads it, so a pass looks at what changed, not at
    the whole tree."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        root_id = next(self._ids)
        self.holders = SeqHolders()
        self.root = Node(
            root_id, None, 0, status=Status.PREFILL, lineage=(root_id,), holders=self.holders
        )
        self.nodes: dict[int, Node] = {self.root.id: self.root}
        self.frontier: dict[int, Node] = {}

    def add_child(self, parent: Node, **kw) -> Node:
        child_id = next(self._ids)
        lineage = (*parent.lineage, child_id)
        child = Node(
            child_id, parent, parent.depth + 1, lineage=lineage, holders=self.holders, **kw
        )
        parent.children.append(child)
        self.nodes[child.id] = child
        self.frontier[child.id] = child
        return child

    def touch(self, node: Node) -> None:
        """A step node that may run again (it was given a plan)."""
        if node.depth > 0:
            self.frontier[node.id] = node

    def add_sibling_copy(self, node: Node, **kw) -> Node:
        """A node with the same parent and the same step prefix (deduplicated candidates that
        diverged)."""
        assert node.parent is not None
        twin = self.add_child(
            node.parent, speculative=node.speculative, status=node.status, group=node.group, **kw
        )
        twin.tokens = list(node.tokens)
        twin.raw = bytearray(node.raw)
        return twin

    def steps(self) -> Iterator[Node]:
        return (n for n in self.nodes.values() if n.depth > 0)
