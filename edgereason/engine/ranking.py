"""Selection decisions over a group, as pure functions of scores and potentials (no side effects).

Every rule counts logical candidates: a node of potential p stands for p candidates with one score.
Two orders rank them (SearchConfig.select):
- top: best score first (search-and-learn's beam search);
- diverse: each parent's best candidate first, best score first; then the other distinct steps; then
  copies of a step already ranked (equal steps of one parent, and the further candidates of a
  deduplicated node). Top-k keeps the beam's lineages apart, as DVTS does, yet a lineage that ends
  or falls behind hands its slots to the others."""

from __future__ import annotations

from edgereason.config import Select
from edgereason.engine.request import Group
from edgereason.tree import Node, path_score, ranked


def ordered(nodes: list[Node], how: str, rule: Select) -> list[Node]:
    """The logical candidates best first under `rule`, one entry per candidate (a node of potential
    p is p entries)."""
    best_first = ranked(nodes, how)
    if rule == "top":
        return [n for n in best_first for _ in range(n.potential)]
    firsts: list[Node] = []
    others: list[Node] = []
    copies: list[Node] = []
    parents: set[int] = set()
    steps: set[tuple[int, bytes]] = set()
    for n in best_first:
        step = (id(n.parent), bytes(n.raw))
        if step in steps:
            copies += [n] * n.potential
            continue
        steps.add(step)
        (others if id(n.parent) in parents else firsts).append(n)
        parents.add(id(n.parent))
        copies += [n] * (n.potential - 1)
    return firsts + others + copies


def _take(nodes: list[Node], keep: int, how: str, rule: Select) -> list[tuple[Node, int]]:
    """The first `keep` logical candidates under `rule` as (node, times), in the order each node
    first comes."""
    times: dict[Node, int] = {}
    for node in ordered(nodes, how, rule)[:keep]:
        times[node] = times.get(node, 0) + 1
    return list(times.items())


def choose(group: Group, how: str, rule: Select) -> list[tuple[Node, int]]:
    """Synchronous selection: the first `keep` logical candidates among the competing members."""
    return _take([m for m in group.live_members() if group.competes(m)], group.keep, how, rule)


def rank_prunable(group: Group, how: str, rule: Select) -> list[Node]:
    """Early pruning, rank rule: a scored competitor that at least `keep` logical candidates rank
    before, whatever the unscored members later score, can never be selected. top: the scored
    competitors strictly better. diverse: the parents with a scored competitor strictly better (each
    parent's best comes before every later step, and is at least that good)."""
    scored = [m for m in group.live_members() if m.score is not None and group.competes(m)]
    if sum(m.potential for m in scored) <= group.keep:
        return []
    scores = {m.id: path_score(m, how) for m in scored}
    out = []
    for m in scored:
        better = [o for o in scored if scores[o.id] > scores[m.id]]
        ahead = (
            sum(o.potential for o in better)
            if rule == "top"
            else len({id(o.parent) for o in better})
        )
        if ahead >= group.keep:
            out.append(m)
    return out


def perfect_set(
    group: Group, how: str, threshold: float, rule: Select
) -> list[tuple[Node, int]] | None:
    """Early pruning, perfect-score rule: once `keep` logical competitors score >= threshold, they
    are the selection (in `rule`'s order); None while too few do."""
    perfect = [
        m
        for m in group.live_members()
        if m.score is not None and group.competes(m) and path_score(m, how) >= threshold
    ]
    if sum(m.potential for m in perfect) < group.keep:
        return None
    return _take(perfect, group.keep, how, rule)


def common_prefix_share(members: list[Node]) -> float:
    """Share of the step tokens of a selection's candidates that lie in a prefix shared with another
    candidate (a node of potential p > 1 shares all its tokens)."""
    total = shared = 0
    for m in members:
        total += len(m.tokens) * m.potential
        if m.potential > 1:
            shared += len(m.tokens) * m.potential
            continue
        best = 0
        for o in members:
            if o is m:
                continue
            k = 0
            for a, b in zip(m.tokens, o.tokens):
                if a != b:
                    break
                k += 1
            best = max(best, k)
        shared += best
    return shared / total if total else 0.0
