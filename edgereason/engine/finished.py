"""A finished request's record, built from the Request alone: the answer, its final paths, the
tree's steps and the metrics that need the whole run (the types are in result.py)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from edgereason.engine.request import Request
from edgereason.engine.result import (
    FinalPath,
    RequestMetrics,
    SearchResult,
    final_paths,
    final_tokens,
    vote,
)
from edgereason.search.grading import Grader
from edgereason.tree import Tree


def build_result(req: Request) -> SearchResult:
    """The record of a finished request (its status and reason set): the best `beams` logical
    candidates among the completed paths, the answer (the best path's, or a vote), the tree's steps,
    and the metrics that need the whole run, its wall time up to now."""
    cfg, grader, tree = req.config, Grader(), req.tree
    paths = final_paths(req.completed, cfg)
    if cfg.vote == "best":
        answer = paths[0].answer if paths else None
    else:
        answer = vote(paths, by_score=cfg.vote == "weighted", grader=grader)
    wall = time.perf_counter() - req.started_at
    return SearchResult(
        req.id,
        req.question,
        answer,
        paths,
        _step_rows(tree),
        _whole_run_metrics(req.metrics, tree, paths, wall),
        req.status,
        req.reason,
        [n.score for n in tree.steps() if n.score is not None],
        list(req.common_prefix),
        grader,
    )


def _whole_run_metrics(
    metrics: RequestMetrics, tree: Tree, paths: list[FinalPath], wall: float
) -> RequestMetrics:
    """The counters the loop recorded, with what needs the whole run: a copy, not a write."""
    final = final_tokens([(tree.nodes[p.node_id], p.potential) for p in paths])
    waits = [n.waiting_s for n in tree.steps() if n.finished_at is not None and not n.path_complete]
    return replace(
        metrics,
        wall_s=wall,
        final_tokens=final,
        goodput_tok_s=final / wall if wall > 0 else 0.0,
        throughput_tok_s=metrics.generated_tokens / wall if wall > 0 else 0.0,
        waiting_ratio=(sum(waits) / len(waits)) / wall if waits and wall > 0 else 0.0,
    )


def _step_rows(tree: Tree) -> list[dict[str, Any]]:
    """The tree as JSON rows, steps only: a first step's parent is None, the root (the prompt) is
    not a step (README: JSON output)."""
    return [
        {
            "id": n.id,
            "parent": n.parent.id if n.parent and n.parent.depth > 0 else None,
            "depth": n.depth,
            "text": n.text,
            "score": n.score,
            "status": n.status.value,
            "finish": n.finish,
            "potential": n.potential,
        }
        for n in tree.steps()
    ]
