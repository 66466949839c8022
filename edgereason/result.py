"""What a finished request returns: the answer, the final candidates, the tree and the metrics (design.md s5)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestMetrics:
    generated_tokens: int = 0  # every sampled token, speculative and pruned ones included
    gen_time_s: float = 0.0  # wall time of forward passes this request took part in
    prm_time_s: float = 0.0
    prm_calls: int = 0
    prm_tokens: int = 0
    prm_requests: int = 0
    wall_s: float = 0.0
    goodput_tok_s: float = 0.0
    throughput_tok_s: float = 0.0
    final_tokens: int = 0  # tokens on the final candidates' paths (shared steps once; see engine._final_tokens)
    waiting_ratio: float = 0.0
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
        return {"steps": [{"text": t, "score": s} for t, s in self.steps], "score": self.score,
                "answer": self.answer}


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
    step_scores: list[float] = field(default_factory=list)  # every PRM score of the request (bench histogram)
    step_common_prefix: list[float] = field(default_factory=list)  # per selection: shared-token share

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "reason": self.reason,
            "paths": [p.as_dict() for p in self.paths],
            "tree": {"nodes": self.tree},
            "metrics": self.metrics.as_dict(),
        }
