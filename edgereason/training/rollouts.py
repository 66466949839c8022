"""Rollouts for training a value head: K sampled solutions per problem, generated through the engine (best-of-N,
so every step of every finished path is also scored by the session's PRM, the judge by default) and graded against
the gold answer.

The file is append-only JSONL, one problem a line, written whole and flushed as each problem finishes: a run that
is interrupted keeps every finished problem, and the next run skips them. A line:
  {"id", "problem", "gold", "paths": [{"steps": [str], "answer": str|null, "correct": bool,
                                       "prm": [float|null], "potential": int}]}
Monte-Carlo lines (mc.py) share the reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from edgereason.bench.dataset import Problem
from edgereason.config import SearchConfig
from edgereason.engine import Engine
from edgereason.grading import answers_match
from edgereason.jsonl import append_line
from edgereason.request import Request
from edgereason.result import SearchResult

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Job:
    """One engine request: a problem, optionally continued from a solution prefix."""

    key: str
    problem: Problem
    prefix: str = ""


def read_jsonl(path: Path) -> Iterator[dict]:
    """Every complete object line; a line cut by a crash (the last one) is skipped."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


def graded_paths(result: SearchResult, gold: str) -> list[dict]:
    return [{"steps": [t for t, _ in p.steps], "answer": p.answer, "correct": answers_match(p.answer, gold),
             "prm": [s for _, s in p.steps], "potential": p.potential} for p in result.paths]


def run_jobs(engine: Engine, jobs: Iterable[Job], config: SearchConfig, concurrency: int,
             on_done: Callable[[Job, SearchResult], None], total: int, progress: Progress | None = None) -> int:
    """Serve the jobs on one engine, at most `concurrency` in flight (a closed loop: a finished job makes room for
    the next), calling on_done as each finishes. Returns the number finished. Ctrl-C propagates; what on_done
    wrote stays written."""
    pending = iter(jobs)
    live: list[tuple[Job, Request]] = []
    done = 0
    exhausted = False
    if progress:
        progress(0, total)
    while True:
        while not exhausted and len(live) < concurrency:
            job = next(pending, None)
            if job is None:
                exhausted = True
                break
            live.append((job, engine.submit(job.problem.problem, config, request_id=job.key, prefix=job.prefix)))
        if not live:
            return done
        engine.step()
        for job, req in [x for x in live if x[1].result is not None]:
            live.remove((job, req))  # a finished request has left the engine already
            on_done(job, req.result)
            done += 1
            if progress:
                progress(done, total)


def collect(engine: Engine, problems: list[Problem], out: Path, samples: int, config: SearchConfig,
            concurrency: int, progress: Progress | None = None) -> int:
    """Append the rollouts of every problem not yet in `out`; returns how many problems were added."""
    seen = {row["id"] for row in read_jsonl(out) if "id" in row}
    todo = [p for p in problems if p.id not in seen]
    cfg = config.with_(strategy="best-of-n", beams=samples, width=1)

    def write(job: Job, result: SearchResult) -> None:
        append_line(out, {"id": job.problem.id, "problem": job.problem.problem, "gold": job.problem.answer,
                          "status": result.status, "paths": graded_paths(result, job.problem.answer)})

    return run_jobs(engine, (Job(p.id, p) for p in todo), cfg, concurrency, write, len(todo), progress)
