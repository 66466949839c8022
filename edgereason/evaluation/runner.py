"""One bench run: a (policy, beams, rate) over all problems on one fresh engine, then run-level
aggregates.

Per-request gen/PRM times count every shared forward pass once per request in it, so run-level times
come from the engine's own record (`Engine.stats`: passes, rows, PRM calls and the time inside the
models)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from edgereason.config import SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import Policy
from edgereason.engine.request import Request
from edgereason.engine.result import RequestMetrics, SearchResult
from edgereason.engine.stats import EngineStats
from edgereason.evaluation.arrivals import arrival_times
from edgereason.search.dataset import Problem
from edgereason.session.auto_policy import is_auto
from edgereason.session.opening import Session

Progress = Callable[[int, int], None]
Checkpoint = Callable[[dict], None]  # the run so far, each time a problem finishes

SUMMED = (
    "spec_tokens",
    "spec_tokens_reused",
    "spec_tokens_wasted",
    "pruned_rank",
    "pruned_perfect",
    "dedup_saved_rows",
    "lookahead_scores",
    "forward_rows",
    "evictions",
)


@dataclass(frozen=True)
class RunSpec:
    policy: Policy
    config: SearchConfig
    rate: float
    repeat: int
    seed: int  # arrival times: the same for every policy of one repetition
    concurrency: int = 0  # most requests in flight at once, later arrivals wait (0: no limit)
    label: str = ""  # the run's name in tables, plots and --compare (default: the policy's)

    @property
    def name(self) -> str:
        return self.label or self.policy.name


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or another stop signal) during a run, carrying what that run finished and the stop
    itself, whose exit code the bench ends with."""

    def __init__(self, run: dict, stop: KeyboardInterrupt) -> None:
        super().__init__()
        self.run = run
        self.stop = stop


def run_one(
    session: Session,
    spec: RunSpec,
    problems: list[Problem],
    progress: Progress | None = None,
    checkpoint: Checkpoint | None = None,
) -> dict:
    """Serve the problems on one engine (arriving by spec.rate, at most spec.concurrency at once)
    and aggregate. Each time a problem finishes, `checkpoint` gets the run so far (marked
    interrupted: it is not done). Ctrl-C ends the run early and raises RunInterrupted carrying the
    problems finished so far (the engine is dropped, so nothing is cancelled)."""
    engine = session.engine(spec.policy)
    record = partial(_record, session, spec, engine, session.requests_per_server())
    arrivals = arrival_times(len(problems), spec.rate, spec.seed)
    requests: list[tuple[Problem, Request]] = []
    if progress:
        progress(0, len(problems))
    t0, finished = time.perf_counter(), 0
    stop: KeyboardInterrupt | None = None
    try:
        while len(requests) < len(problems) or engine.busy:
            now = time.perf_counter() - t0
            while (
                len(requests) < len(problems)
                and arrivals[len(requests)] <= now
                and _has_room(spec, requests)
            ):
                p = problems[len(requests)]
                requests.append((p, engine.submit(p.problem, spec.config, request_id=p.id)))
            if engine.busy:
                engine.step()
            elif len(requests) < len(problems):
                time.sleep(max(0.0, arrivals[len(requests)] - now))
            done = sum(r.result is not None for _, r in requests)
            if progress:
                progress(done, len(problems))
            if checkpoint and done > finished:
                checkpoint(record(requests, time.perf_counter() - t0, True))
            finished = done
    except KeyboardInterrupt as e:
        stop = e
    run = record(requests, time.perf_counter() - t0, stop is not None)
    if stop is not None:
        raise RunInterrupted(run, stop)
    return run


def _record(
    session: Session,
    spec: RunSpec,
    engine: Engine,
    served_before: dict[str, dict[str, int]],
    requests: list[tuple[Problem, Request]],
    wall: float,
    interrupted: bool,
) -> dict:
    """The run's record: its aggregates, whether it was cut short, and how it used the servers."""
    run = aggregate(spec, engine, requests, wall)
    run["interrupted"] = interrupted
    if served_before:  # served models: how the run's requests spread over the servers
        run["requests_per_server"] = _requests_since(served_before, session.requests_per_server())
    if is_auto(spec.policy):  # which preset `auto` ran, and why
        run["auto_policy"] = session.auto_choice().as_dict()
    return run


def _requests_since(
    before: dict[str, dict[str, int]], now: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """Each server's requests by role, counted from `before` (the session's servers answered earlier
    runs too)."""
    return {
        url: {role: n - before.get(url, {}).get(role, 0) for role, n in roles.items()}
        for url, roles in now.items()
    }


def _has_room(spec: RunSpec, requests: list[tuple[Problem, Request]]) -> bool:
    return not spec.concurrency or sum(r.result is None for _, r in requests) < spec.concurrency


def aggregate(
    spec: RunSpec, engine: Engine, requests: list[tuple[Problem, Request]], wall: float
) -> dict:
    """Run-level numbers over the requests that finished normally (design.md section 5)."""
    done = [(p, r.result) for p, r in requests if r.result is not None]
    per_problem = [_problem_record(p, res) for p, res in done]
    metrics = [res.metrics for _, res in done]
    correct = sum(pp["correct"] for pp in per_problem)
    run = {
        **_run_labels(spec),
        "problems": len(done),
        "correct": correct,
        "accuracy": correct / len(done) if done else 0.0,
        **token_and_latency_numbers(per_problem, wall),
        **_model_time_numbers(engine.stats, metrics, wall),
        "failed": sum(res.status == "failed" for _, res in done),
        "graded_as_text": sum(pp["graded_as_text"] for pp in per_problem),
    }
    run.update({k: sum(getattr(m, k) for m in metrics) for k in SUMMED})
    # the slots speculation can fill: a synchronous step leaves them idle while its stragglers
    # finish
    run["forward_passes"] = engine.stats.passes
    # failed too
    run["rows_per_pass"] = engine.stats.rows / engine.stats.passes if engine.stats.passes else 0.0
    run["policy_switches"] = engine.policy.switches()  # as run: `auto` resolved
    run["per_problem"] = per_problem
    return run


def _problem_record(p: Problem, res: SearchResult) -> dict:
    """One finished problem's line of the run's per_problem list."""
    m = res.metrics
    return {
        "id": p.id,
        "answer": res.answer,
        "gold": p.answer,
        "correct": res.grader.match(res.answer, p.answer),  # within the budget of its vote
        "status": res.status,
        "latency": m.wall_s,
        "tokens": m.generated_tokens,
        "final_tokens": m.final_tokens,
        "waiting_ratio": m.waiting_ratio,
        "step_scores": res.step_scores,
        "common_prefix": res.step_common_prefix,
        # the final candidates, best first, with each step's PRM score (None: unscored): lets a vote
        # rule or a way of adding up step scores be compared after the run on the same paths
        "graded_as_text": res.grader.note is not None,  # the grading budget ran out (grading.py)
        "paths": [
            {
                "answer": fp.answer,
                "score": fp.score,
                "potential": fp.potential,
                "step_scores": [score for _, score in fp.steps],
            }
            for fp in res.paths
        ],
    }


def _run_labels(spec: RunSpec) -> dict:
    """What the run was: policy, search shape, arrival rate."""
    cfg = spec.config
    return {
        "policy": spec.name,
        "strategy": cfg.strategy,
        "beams": cfg.beams,
        "width": cfg.width,
        "rate": rate_label(spec.rate),
        "concurrency": spec.concurrency,
        "repeat": spec.repeat,
    }


def token_and_latency_numbers(per_problem: list[dict], wall: float) -> dict:
    """Tokens made, their rates over the run's wall time, and the requests' latencies: from the
    problems' records alone, so that a resumed run's are those of all its problems (resume.py)."""
    generated = sum(pp["tokens"] for pp in per_problem)
    final = sum(pp["final_tokens"] for pp in per_problem)
    latencies = [pp["latency"] for pp in per_problem]
    normalized = [
        1000 * pp["latency"] / pp["final_tokens"] for pp in per_problem if pp["final_tokens"]
    ]
    return {
        "wall_s": wall,
        "generated_tokens": generated,
        "final_tokens": final,
        "throughput_tok_s": generated / wall if wall > 0 else 0.0,
        "goodput_tok_s": final / wall if wall > 0 else 0.0,
        "latency_s_mean": _mean(latencies),
        "latency_s_p90": _quantile(latencies, 0.9),
        "normalized_latency_ms_mean": _mean(normalized),
        "waiting_ratio_median": _quantile([pp["waiting_ratio"] for pp in per_problem], 0.5),
    }


def _model_time_numbers(stats: EngineStats, metrics: list[RequestMetrics], wall: float) -> dict:
    """Time inside the models (from the engine's record), the PRM's batching, recomputation and KV
    peak."""
    gen_s, prm_s = stats.gen_s, stats.prm_s
    prm_tokens = sum(m.prm_tokens for m in metrics)
    return {
        "gen_time_s": gen_s,
        "prm_time_s": prm_s,
        "other_time_s": max(0.0, wall - gen_s - prm_s),
        "prm_calls": stats.prm_calls,
        "prm_requests_per_call_mean": _mean(stats.prm_batches),
        "prm_tokens": prm_tokens,
        "prm_batch_tokens_mean": prm_tokens / stats.prm_calls if stats.prm_calls else 0.0,
        "recomputed_tokens": sum(m.recomputed_tokens for m in metrics) + stats.prm_rebuilt_tokens,
        "peak_kv_tokens": max((m.peak_kv_tokens for m in metrics), default=0),
    }


def rate_label(rate: float) -> float | str:
    """JSON has no infinity: an all-at-once run is written as the string "inf"."""
    return "inf" if math.isinf(rate) else rate


def _mean(values: list[float] | list[int]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else 0.0
