"""What a finished request returns: the answer, the final candidates, the tree and the metrics
(design.md s5); `finished.py` builds it from the request."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from edgereason.config import SearchConfig
from edgereason.search.grading import Grader
from edgereason.tree import FINISH_WORDS, Node, path_score, ranked
from edgereason.util.braces import extract_boxed


@dataclass
class Counters:
    """The metrics the engine's parts count during a call (engine/counts.py's Counts adds them up);
    RequestMetrics is these and what the loop and build_result set."""

    generated_tokens: int = 0  # every sampled token, speculative and pruned ones included
    prm_time_s: float = 0.0
    prm_calls: int = 0
    prm_tokens: int = 0
    prm_requests: int = 0
    forward_rows: int = 0  # sequences evaluated, summed over forward passes
    dedup_saved_rows: int = 0  # draws served by a shared row instead of a row of their own
    spec_tokens: int = 0
    spec_tokens_reused: int = 0
    spec_tokens_wasted: int = 0
    pruned_rank: int = 0
    pruned_perfect: int = 0
    lookahead_scores: int = 0
    recomputed_tokens: int = 0
    evictions: int = 0


@dataclass
class RequestMetrics(Counters):
    gen_time_s: float = 0.0  # wall time of forward passes this request took part in
    wall_s: float = 0.0
    goodput_tok_s: float = 0.0
    throughput_tok_s: float = 0.0
    # tokens on the final candidates' paths (shared steps once; see final_tokens)
    final_tokens: int = 0
    waiting_ratio: float = 0.0
    peak_kv_tokens: int = 0  # generator + verifier
    peak_generator_kv_tokens: int = 0
    peak_verifier_kv_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FinalPath:
    steps: list[tuple[str, float | None]]
    score: float
    answer: str | None
    node_id: int
    potential: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": [{"text": t, "score": s} for t, s in self.steps],
            "score": self.score,
            "answer": self.answer,
        }


@dataclass
class SearchResult:
    request_id: str
    question: str
    answer: str | None
    paths: list[FinalPath]
    tree: list[dict[str, Any]]
    metrics: RequestMetrics
    status: str = "done"  # done | cancelled | failed
    reason: str | None = None
    # every PRM score of the request (bench histogram)
    step_scores: list[float] = field(default_factory=list)
    # per selection: shared-token share
    step_common_prefix: list[float] = field(default_factory=list)
    # the vote's comparisons as math and the figures shown with it share one budget (grading.py)
    grader: Grader = field(default_factory=Grader, repr=False, compare=False)

    def reaches_answer(self, path: FinalPath) -> bool:
        return (
            self.answer is not None
            and path.answer is not None
            and self.grader.match(path.answer, self.answer)
        )

    def answer_path(self) -> FinalPath | None:
        """The best-ranked path that reaches the answer: under a vote the best path may hold another
        answer."""
        return next(
            (p for p in self.paths if self.reaches_answer(p)), self.paths[0] if self.paths else None
        )

    def answer_support(self) -> tuple[int, int]:
        """(paths that reach the answer, paths), each counted by its potential (deduplicated
        copies)."""
        return (
            sum(p.potential for p in self.paths if self.reaches_answer(p)),
            sum(p.potential for p in self.paths),
        )

    def best_path_title(self, best: FinalPath) -> str:
        if self.answer is None:
            return f"Best path (score {best.score:.3f})"
        agree, total = self.answer_support()
        return f"Best path to it (score {best.score:.3f}; {agree} of {total} paths reach it)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "reason": self.reason,
            "paths": [p.as_dict() for p in self.paths],
            "tree": {"nodes": self.tree},
            "metrics": self.metrics.as_dict(),
        }


def final_paths(completed: Sequence[Node], cfg: SearchConfig) -> list[FinalPath]:
    """The best completed paths, `beams` logical candidates in all (a scored path, or one no step of
    which was scored, e.g. when the search was cut short)."""
    finals = ranked(
        [n for n in completed if n.score is not None or not n.path_scores()], cfg.aggregation
    )
    paths, slots = [], cfg.beams
    for node in finals:
        if slots <= 0:
            break
        times = min(node.potential, slots)
        slots -= times
        paths.append(
            FinalPath(
                [(s.text, s.score) for s in node.path()],
                path_score(node, cfg.aggregation),
                extract_boxed("".join(s.text for s in node.path())),
                node.id,
                times,
            )
        )
    return paths


def final_tokens(finals: Sequence[tuple[Node, int]]) -> int:
    """Tokens on the final candidates' paths, shared steps once. A deduplicated node stands for
    several equal nodes: a final one for `times` candidates, an earlier one for as many as its
    selection kept (capped by the final candidates below it), so the figure is the one the same tree
    would give without deduplication."""
    through: dict[int, tuple[Node, int]] = {}
    for leaf, times in finals:
        for node in leaf.path():
            through[id(node)] = (node, through.get(id(node), (node, 0))[1] + times)
    leaves = {id(leaf) for leaf, _ in finals}
    return sum(
        len(node.tokens)
        * (t if id(node) in leaves else min(node.times_selected or node.potential, t))
        for node, t in through.values()
    )


def completed_reason(completed: Sequence[Node]) -> str:
    """Why a search that ran to its end stopped: its completed paths (logical candidates) by how
    each ended."""
    by_finish: Counter[str] = Counter()
    for node in completed:
        by_finish[str(node.finish)] += node.potential
    total = sum(by_finish.values())
    detail = ", ".join(f"{n} {FINISH_WORDS.get(f, f)}" for f, n in by_finish.most_common())
    return f"completed {total} path{'s' if total != 1 else ''}" + (f" ({detail})" if detail else "")


def vote(
    paths: Sequence[FinalPath], by_score: bool = True, grader: Grader | None = None
) -> str | None:
    """Majority over distinct answers, compared as math: each path counts its potential, times its
    score when by_score (weighted). Ties go to the answer of the better-ranked path (paths come best
    first). grader: the search's, whose budget bounds the comparisons (a new one where none is
    given)."""
    grader = grader or Grader()
    buckets: list[tuple[str, float]] = []
    for p in paths:
        if p.answer is None:
            continue
        for i, (ans, w) in enumerate(buckets):
            if grader.match(ans, p.answer):
                buckets[i] = (ans, w + (p.score if by_score else 1.0) * p.potential)
                break
        else:
            buckets.append((p.answer, (p.score if by_score else 1.0) * p.potential))
    if not buckets:
        return paths[0].answer if paths else None
    return max(buckets, key=lambda b: b[1])[0]
