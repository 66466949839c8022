"""What each strategy object answers (the engine asks only these questions;
tests/engine/test_engine.py runs them all)."""

from __future__ import annotations

from edgereason.config import SearchConfig
from edgereason.search.strategies import STRATEGIES
from edgereason.tree import Node


def _step(finish: str | None, score: float | None = None, parent: Node | None = None) -> Node:
    root = parent or Node(0, None, 0)
    return Node(root.depth + 10, root, root.depth + 1, finish=finish, score=score)


def test_first_plans_draw_beams_candidates_in_the_strategys_groups() -> None:
    cfg = SearchConfig(beams=8, width=4)
    assert STRATEGIES["beam"].first_plan(cfg) == [(2, 4, 8)]
    assert STRATEGIES["dvts"].first_plan(cfg) == [(1, 4, 4)] * 2
    assert STRATEGIES["best-of-n"].first_plan(cfg) == [(1, 1, 1)] * 8


def test_best_of_n_scores_whole_solutions_and_waits_only_for_finished_ones() -> None:
    bon, beam = STRATEGIES["best-of-n"], STRATEGIES["beam"]
    first = _step("step")
    last = _step("answer", parent=first)
    assert not bon.scores_step(first) and bon.scores_step(last) and beam.scores_step(first)
    assert bon.scored_nodes(last) == [first, last] and beam.scored_nodes(last) is None
    # an unscored step in the middle of a solution
    assert bon.ready([first]) and not beam.ready([first])
    assert not bon.ready([last])
    assert not bon.early_prune and beam.early_prune


def test_who_competes_and_who_carries_on() -> None:
    done, going = _step("answer", 0.9), _step("step", 0.5)
    assert STRATEGIES["dvts"].competes(done) and not STRATEGIES["beam"].competes(done)
    assert STRATEGIES["beam"].competes(going)
    assert STRATEGIES["beam"].carries_on(completed_logical=3, beams=4, finished_subtree=True)
    assert not STRATEGIES["beam"].carries_on(completed_logical=4, beams=4, finished_subtree=False)
    assert not STRATEGIES["dvts"].carries_on(completed_logical=0, beams=4, finished_subtree=True)
    assert STRATEGIES["dvts"].carries_on(completed_logical=0, beams=4, finished_subtree=False)


def test_the_registry_runs_every_strategy_the_config_accepts():
    """SearchConfig validates --strategy against config's names; each must have a strategy object
    here."""
    from edgereason.config import STRATEGY_NAMES

    assert sorted(STRATEGIES) == sorted(STRATEGY_NAMES)
