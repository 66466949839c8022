"""Selection decisions over a group, as pure functions of scores and potentials (no side effects).

Every rule counts logical candidates: a node of potential p stands for p candidates with one score.
"""

from __future__ import annotations

from edgereason.request import Group
from edgereason.tree import Node, path_score, ranked


def _take(nodes: list[Node], keep: int, how: str) -> list[tuple[Node, int]]:
    """The best `keep` logical candidates as (node, times): a node of potential p fills up to p slots."""
    slots, chosen = keep, []
    for node in ranked(nodes, how):
        if slots <= 0:
            break
        times = min(node.potential, slots)
        chosen.append((node, times))
        slots -= times
    return chosen


def choose(group: Group, how: str) -> list[tuple[Node, int]]:
    """Synchronous selection: the top `keep` logical candidates among the competing members."""
    return _take([m for m in group.live_members() if group.competes(m)], group.keep, how)


def rank_prunable(group: Group, how: str) -> list[Node]:
    """Early pruning, rank rule: a scored competitor with at least `keep` logical scored competitors strictly
    better can never be selected, whatever the unscored members later score."""
    scored = [m for m in group.live_members() if m.score is not None and group.competes(m)]
    if sum(m.potential for m in scored) <= group.keep:
        return []
    scores = {m.id: path_score(m, how) for m in scored}
    out = []
    for m in scored:
        better = sum(o.potential for o in scored if scores[o.id] > scores[m.id])
        if better >= group.keep:
            out.append(m)
    return out


def perfect_set(group: Group, how: str, threshold: float) -> list[tuple[Node, int]] | None:
    """Early pruning, perfect-score rule: once `keep` logical competitors score >= threshold, they are the
    selection (best first); None while too few do."""
    perfect = [m for m in group.live_members() if m.score is not None and group.competes(m)
               and path_score(m, how) >= threshold]
    if sum(m.potential for m in perfect) < group.keep:
        return None
    return _take(perfect, group.keep, how)


def common_prefix_share(members: list[Node]) -> float:
    """Share of the step tokens of a selection's candidates that lie in a prefix shared with another candidate
    (a node of potential p > 1 shares all its tokens)."""
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
