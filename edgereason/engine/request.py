"""One search request and its selection groups: the state the engine, scheduler and selection
share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from edgereason.config import SearchConfig
from edgereason.engine.result import RequestMetrics, SearchResult
from edgereason.search.strategies import STRATEGIES, Strategy
from edgereason.tree import Node, Status, Tree

RequestStatus = Literal["waiting", "running", "done", "cancelled", "failed"]


@dataclass(eq=False)
class Group:
    """Candidates that compete in one selection. `keep` counts logical candidates (potentials)."""

    id: int
    strategy: Strategy
    keep: int
    width: int  # children per kept logical candidate
    members: list[Node] = field(default_factory=list)
    selected: bool = False
    kept: int = 0  # logical candidates kept when selected
    awaiting: int = 0  # draws planned into this group whose forward pass has not run yet

    def live_members(self) -> list[Node]:
        return [m for m in self.members if m.alive]

    def steps_done(self) -> bool:
        if self.awaiting:  # most groups at most steps: no need to look at the members
            return False
        alive = self.live_members()
        return bool(alive) and all(m.step_done for m in alive)

    def ready(self) -> bool:
        """Every planned draw ran, every live member finished its step, and the strategy's scores
        are in."""
        return self.steps_done() and self.strategy.ready(self.live_members())

    def competes(self, node: Node) -> bool:
        return self.strategy.competes(node)


@dataclass(eq=False)
class Request:
    id: str
    question: str
    config: SearchConfig
    prompt_ids: list[int]
    tree: Tree = field(default_factory=Tree)
    groups: dict[int, Group] = field(default_factory=dict)
    completed: list[Node] = field(default_factory=list)
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    started_at: float = field(default_factory=time.perf_counter)
    status: RequestStatus = "running"
    reason: str | None = None
    prompt_fed: int = 0
    result: SearchResult | None = None
    common_prefix: list[float] = field(default_factory=list)
    idle_steps: int = 0  # consecutive engine steps in which nothing happened for this request
    prm_held: set[str] = field(default_factory=set)  # node keys the verifier holds a path under
    prm_keyed: dict[int, Node] = field(default_factory=dict)  # nodes given a prm_key, by id
    prm_stale: bool = False  # a node was pruned, completed or fully expanded since the last release
    # the groups not selected yet, by id (a selection is final): what each engine step looks at
    unselected: dict[int, Group] = field(default_factory=dict)
    _next_group: int = 0

    def plan(
        self, node: Node, plan: list[tuple[int | None, int]], speculative: bool = False
    ) -> None:
        """Schedule children for `node`; the groups they join wait for them before they can be
        selected."""
        self.cancel_plan(node)
        node.plan, node.plan_speculative = plan, speculative
        self.tree.touch(node)
        for gid, n in plan:
            if gid is not None:
                self.groups[gid].awaiting += n

    def cancel_plan(self, node: Node) -> None:
        for gid, n in node.plan or []:
            if gid is not None:
                self.groups[gid].awaiting -= n
        node.plan, node.plan_speculative = None, False

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.config.strategy]

    def new_group(self, keep: int, width: int) -> Group:
        group = Group(self._next_group, self.strategy, keep, width)
        self.groups[group.id] = group
        self.unselected[group.id] = group
        self._next_group += 1
        return group

    def join(self, node: Node, group_id: int | None) -> None:
        node.group = group_id
        if group_id is not None:
            self.groups[group_id].members.append(node)

    def unselected_groups(self) -> list[Group]:
        """The groups not selected yet, in id order (those selected since the last call leave)."""
        for gid in [gid for gid, g in self.unselected.items() if g.selected]:
            del self.unselected[gid]
        return list(self.unselected.values())

    def open_groups(self) -> list[Group]:
        return [g for g in self.unselected_groups() if g.live_members()]

    def selected_groups(self) -> int:
        return len(self.groups) - len(self.unselected_groups())

    def completed_logical(self) -> int:
        return sum(n.potential for n in self.completed)

    def key(self, node: Node) -> str:
        return f"{self.id}/{node.id}/"

    def group_of(self, node: Node) -> Group | None:
        return self.groups.get(node.group) if node.group is not None else None

    def check(self) -> None:
        """A running request's groups keep their counts; raises AssertionError on the first
        violation."""
        assert self.status == "running", f"finished request {self.id} is still in the engine"
        for g in self.groups.values():
            assert not g.selected or g.kept <= g.keep, f"group {g.id} kept {g.kept} > {g.keep}"
            assert g.awaiting >= 0 and all(m.potential >= 1 for m in g.members), (
                f"group {g.id}: bad counts"
            )
        held = sum(1 for n in self.tree.nodes.values() if n.seq is not None)
        assert self.held_seqs() == held, f"{self.held_seqs()} sequences counted, {held} held"
        for n in self.tree.steps():  # what the scheduler and release_dead read in place of a walk
            if n.alive and (n.plan or not n.step_done):
                assert n.id in self.tree.frontier, f"node {n.id} may run but is not in the frontier"
            if n.prm_key and n.alive and n.status is not Status.COMPLETE:
                assert n.id in self.prm_keyed, f"node {n.id} holds a live PRM key, not listed"

    def held_seqs(self) -> int:
        """Generator sequences its nodes hold (the tree counts them as they change hands)."""
        return self.tree.holders.count

    def unclaimed_seqs(self) -> int:
        """Sequences set aside for it at admission (one a beam) that it does not hold now."""
        return max(0, self.config.beams - self.held_seqs())

    def busy(self) -> bool:
        """Anything left to generate, score or select."""
        if self.prompt_fed < len(self.prompt_ids) or self.tree.root.plan:
            return True
        # newest first: the nodes still at work are the recent ones, so `any` stops early
        return any(
            n.alive and (n.plan or n.status not in (Status.SELECTED, Status.COMPLETE))
            for n in reversed(self.tree.nodes.values())
            if n.depth > 0
        )
