"""Selection, aggregation, voting and pruning rules on the deterministic fake backend."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine import ranking
from edgereason.engine.events import NodeSelected, NodeStatus
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.engine.request import Group
from edgereason.engine.result import FinalPath, vote
from edgereason.search.strategies import STRATEGIES
from edgereason.tree import Node, aggregate
from tests.fakes import FakeGenerator, FakeVerifier


def _group(
    scores: list[float],
    keep: int,
    potentials: list[int] | None = None,
    parents: list[int] | None = None,
    steps: list[bytes] | None = None,
) -> Group:
    """A beam group of scored steps; parents[i] numbers member i's parent (default: all one parent),
    steps[i] is its text (default: all different)."""
    g = Group(0, STRATEGIES["beam"], keep, 2)
    by_number: dict[int, Node] = {}
    for i, s in enumerate(scores):
        number = parents[i] if parents else 0
        parent = by_number.setdefault(number, Node(100 + number, None, 0))
        n = Node(
            i + 1, parent, 1, potential=(potentials or [1] * len(scores))[i], finish="step", score=s
        )
        n.tokens = [i]
        n.raw = bytearray(steps[i] if steps else b"step %d" % i)
        g.members.append(n)
    return g


def _kept(g: Group, rule: str = "top") -> list[tuple[float, int]]:
    return [(n.score, t) for n, t in ranking.choose(g, "last", rule)]


def test_aggregation():
    assert aggregate([0.5, 0.2, 0.9], "last") == 0.9
    assert aggregate([0.5, 0.2, 0.9], "min") == 0.2
    assert abs(aggregate([0.5, 0.2], "prod") - 0.1) < 1e-12
    assert abs(aggregate([0.5, 0.2, 0.9], "mean") - 1.6 / 3) < 1e-12


def test_choose_keeps_exactly_k_logical_candidates():
    assert _kept(_group([0.1, 0.9, 0.5, 0.7], keep=2)) == [(0.9, 1), (0.7, 1)]
    assert _kept(_group([0.9, 0.5], keep=3, potentials=[2, 4])) == [(0.9, 2), (0.5, 1)]


def test_diverse_selection_keeps_each_parents_best_first():
    two_parents = dict(keep=2, parents=[0, 0, 0, 1, 1])
    assert _kept(_group([0.9, 0.8, 0.7, 0.3, 0.2], **two_parents)) == [(0.9, 1), (0.8, 1)]
    assert _kept(_group([0.9, 0.8, 0.7, 0.3, 0.2], **two_parents), "diverse") == [
        (0.9, 1),
        (0.3, 1),
    ]
    # one parent: the best steps, as top-k keeps them
    assert _kept(_group([0.1, 0.9, 0.5, 0.7], keep=3), "diverse") == [(0.9, 1), (0.7, 1), (0.5, 1)]
    # more parents than slots: the best parents' best steps
    assert _kept(_group([0.2, 0.9, 0.6, 0.5], keep=2, parents=[0, 1, 2, 2]), "diverse") == [
        (0.9, 1),
        (0.6, 1),
    ]


def test_diverse_selection_ranks_a_repeated_step_last():
    same = dict(keep=2, steps=[b"x = 2\n\n", b"x = 2\n\n", b"x = 3\n\n"])
    assert _kept(_group([0.9, 0.8, 0.1], **same)) == [(0.9, 1), (0.8, 1)]
    assert _kept(_group([0.9, 0.8, 0.1], **same), "diverse") == [(0.9, 1), (0.1, 1)]
    # a deduplicated node stands for equal steps: one slot first, its other candidates only to fill
    # the rest
    assert _kept(_group([0.9, 0.1], keep=2, potentials=[3, 1]), "diverse") == [(0.9, 1), (0.1, 1)]
    assert _kept(_group([0.9, 0.1], keep=3, potentials=[3, 1]), "diverse") == [(0.9, 2), (0.1, 1)]
    assert _kept(_group([0.9], keep=2, potentials=[3]), "diverse") == [(0.9, 2)]


def test_weighted_vote_sums_scores_per_answer_as_math():
    paths = [FinalPath([], 0.9, "5", 1), FinalPath([], 0.5, "4", 2), FinalPath([], 0.5, "4.0", 3)]
    assert vote(paths) == "4"
    assert vote(paths[:1]) == "5"


def test_majority_vote_counts_paths_and_breaks_ties_by_rank():
    paths = [
        FinalPath([], 0.9, "5", 1, potential=2),
        FinalPath([], 0.1, "4", 2),
        FinalPath([], 0.1, "4.0", 3),
    ]
    assert vote(paths, by_score=False) == "5"  # 2 (potential) against 2: the better-ranked answer
    assert vote(paths + [FinalPath([], 0.05, "4", 4)], by_score=False) == "4"
    assert vote(paths, by_score=True) == "5"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 3), st.integers(1, 3), st.integers(0, 2)),
        min_size=2,
        max_size=10,
    ),
    st.integers(1, 4),
    st.sampled_from(["top", "diverse"]),
    st.randoms(),
)
def test_rank_rule_never_prunes_what_sync_selection_keeps(members, keep, rule, rnd):
    """Reveal scores in a random order; whatever the rank rule prunes on the way must not be in the
    final synchronous selection. members: (score, parent, potential, step text)."""
    scores, parents, potentials, steps = (list(c) for c in zip(*members))
    shape = dict(
        keep=min(keep, len(scores)),
        parents=parents,
        potentials=potentials,
        steps=[b"%d" % s for s in steps],
    )
    kept = {n.id for n, _ in ranking.choose(_group(scores, **shape), "last", rule)}
    partial = _group(scores, **shape)
    order = list(range(len(scores)))
    rnd.shuffle(order)
    for m in partial.members:
        m.score = None
    for i in order:
        partial.members[i].score = scores[i]
        for pruned in ranking.rank_prunable(partial, "last", rule):
            assert pruned.id not in kept
            pruned.status = pruned.status.PRUNED


def test_diverse_rank_rule_prunes_once_enough_parents_are_ahead():
    g = _group([0.9, 0.8, 0.5, 0.4, 0.3], keep=2, parents=[0, 0, 1, 1, 1])
    g.members[4].score = None  # still unscored: the parents' bests are known
    assert [m.score for m in ranking.rank_prunable(g, "last", "top")] == [0.5, 0.4]
    assert [m.score for m in ranking.rank_prunable(g, "last", "diverse")] == [0.4]


def test_engine_selection_keeps_k_each_step_on_fake_backend():
    events = []
    engine = Engine(
        FakeGenerator(), FakeVerifier(), parse_policy("baseline"), on_event=events.append
    )
    cfg = SearchConfig(
        beams=8, width=4, max_steps=5, max_step_tokens=16, sampling=SamplingParams(seed=2)
    )
    req = engine.submit("question", cfg)
    result = engine.run_until_done(check=True)[0]
    assert result.status == "done" and engine.requests == []  # a finished request leaves the engine
    for g in req.groups.values():
        if g.selected and g.kept:
            assert g.kept == min(2, sum(m.potential for m in g.members if not m.path_complete))
    assert any(isinstance(e, NodeSelected) for e in events)


def test_lazy_verification_batches_prm_requests():
    cfg = SearchConfig(
        beams=8, width=2, max_steps=4, max_step_tokens=16, sampling=SamplingParams(seed=5)
    )
    eager, lazy = FakeVerifier(), FakeVerifier()
    Engine(FakeGenerator(), eager, parse_policy("naive-spec")).solve("q", cfg, check=True)
    Engine(
        FakeGenerator(), lazy, parse_policy("naive-spec:lazy_verify=true:lv_threshold=100000")
    ).solve("q", cfg, check=True)
    assert sum(lazy.calls) / len(lazy.calls) > sum(eager.calls) / len(eager.calls)


def test_rank_rule_prunes_early_on_fake_backend():
    """specscale prunes by rank before the whole group is scored: the metric, the events and the
    tree agree."""
    events = []
    engine = Engine(
        FakeGenerator(),
        FakeVerifier(),
        parse_policy("specscale:dedup=false"),
        on_event=events.append,
    )
    cfg = SearchConfig(
        beams=8, width=4, max_steps=4, max_step_tokens=16, sampling=SamplingParams(seed=3)
    )
    result = engine.solve("q", cfg, check=True)
    assert result.status == "done"
    ranked_out = [e.node_id for e in events if isinstance(e, NodeStatus) and e.rule == "rank"]
    # a pruned node takes its speculative subtree
    assert len(ranked_out) >= result.metrics.pruned_rank > 0
    status = {n["id"]: n["status"] for n in result.tree}
    assert all(status[i] == "pruned" for i in ranked_out)


def test_greedy_presets_agree_exactly_on_fake_backend():
    cfg = SearchConfig(
        beams=4, width=2, max_steps=5, max_step_tokens=16, sampling=SamplingParams(temperature=0)
    )
    outcomes = set()
    for preset in (
        "baseline",
        "fasttts",
        "specscale:early_prune_perfect=false",
        "edge:early_prune_perfect=false",
    ):
        result = Engine(FakeGenerator(), FakeVerifier(), parse_policy(preset)).solve(
            "q", cfg, check=True
        )
        outcomes.add(
            (result.answer, tuple(t for t, _ in result.paths[0].steps), result.paths[0].score)
        )
    assert len(outcomes) == 1


def test_token_metrics_count_logical_candidates_with_deduplication():
    """Greedy: every candidate is the same path. Deduplication runs one row for them all, yet the
    tokens sampled are those of the candidates, as without it, and the final tokens count every
    candidate's last step; only forward rows drop. (Which equal nodes survive without deduplication
    is a tie-break, so the shared steps of the final paths may count up to the times their node was
    selected.)"""
    cfg = SearchConfig(
        beams=4, width=2, max_steps=4, max_step_tokens=16, sampling=SamplingParams(temperature=0)
    )
    (plain, _), (dedup, result) = (
        (r.metrics, r)
        for r in (
            Engine(FakeGenerator(), FakeVerifier(), parse_policy(p)).solve("q", cfg, check=True)
            for p in ("baseline", "baseline:dedup=true")
        )
    )
    assert dedup.generated_tokens == plain.generated_tokens > 0
    # the fake: a char a token
    path_tokens = [len(n["text"]) - n["text"].count("\n\n") for n in result.tree]
    assert plain.final_tokens <= dedup.final_tokens <= 4 * sum(path_tokens)
    assert dedup.final_tokens >= 4 * path_tokens[-1]  # the last step, once per final candidate
    assert dedup.forward_rows < plain.forward_rows
