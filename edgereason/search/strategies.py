"""Search strategies (design.md section 3), one small object each, registered by the names
`--strategy` takes.

A strategy answers the questions where the strategies differ; the engine's mechanics (KV sequences,
verification, selection, pruning) are the same for all of them:
- first plan: the selection groups the root's draws go into, as (keep, width, draws) per group;
- scoring scope: which finished steps are scored, and which steps of the path one PRM request
  covers;
- readiness: when a group whose steps are done can be selected;
- who competes: which members a selection ranks;
- after select: whether the selected nodes carry on or the subtree is finished.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from edgereason.config import SearchConfig
from edgereason.tree import Node


class Strategy(ABC):
    """Defaults: every finished step is scored on its own, a group is ready once every live member
    is scored, unfinished paths compete, and a finished path among the selected ends its subtree."""

    name: str
    early_prune = True  # the early-pruning rules rank competitors; a group of one has none

    @abstractmethod
    def first_plan(self, config: SearchConfig) -> list[tuple[int, int, int]]:
        """The root's groups as (keep, width, draws)."""

    def scores_step(self, node: Node) -> bool:
        """Whether this finished step goes to the PRM."""
        return True

    def scored_nodes(self, node: Node) -> list[Node] | None:
        """The steps one PRM request for `node` scores; None: the step alone (lookahead may add a
        child)."""
        return None

    def ready(self, alive: list[Node]) -> bool:
        """A group whose live members all finished their step can be selected."""
        return all(m.score is not None for m in alive)

    def competes(self, node: Node) -> bool:
        return not node.path_complete

    def carries_on(self, completed_logical: int, beams: int, finished_subtree: bool) -> bool:
        """After a selection: do the selected unfinished nodes expand? False ends what remains of
        the group."""
        return not finished_subtree


class Beam(Strategy):
    """One group of `beams` candidates; `keep` survive each step and each draws `width` children."""

    name = "beam"

    def first_plan(self, config: SearchConfig) -> list[tuple[int, int, int]]:
        return [(config.keep, config.width, config.beams)]

    def carries_on(self, completed_logical: int, beams: int, finished_subtree: bool) -> bool:
        # a finished path does not end the beam: the others carry on until `beams` paths are
        # complete
        return completed_logical < beams


class DVTS(Strategy):
    """Diverse verifier tree search: beams / width independent subtrees, each keeping its best node
    per step. Finished paths compete too: the subtree's best may be a finished one, which ends that
    subtree."""

    name = "dvts"

    def first_plan(self, config: SearchConfig) -> list[tuple[int, int, int]]:
        return [(1, config.width, config.width) for _ in range(config.beams // config.width)]

    def competes(self, node: Node) -> bool:
        return True


class BestOfN(Strategy):
    """`beams` independent solutions, each scored once it is complete (every step of its path in one
    request)."""

    name = "best-of-n"
    early_prune = False

    def first_plan(self, config: SearchConfig) -> list[tuple[int, int, int]]:
        return [(1, 1, 1) for _ in range(config.beams)]

    def scores_step(self, node: Node) -> bool:
        return node.path_complete

    def scored_nodes(self, node: Node) -> list[Node] | None:
        return [n for n in node.path() if n.score is None]

    def ready(self, alive: list[Node]) -> bool:
        return all(m.score is not None or not m.path_complete for m in alive)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Beam(), BestOfN(), DVTS())}
