"""Rollouts for training a value head: K solutions per problem, generated through the engine and
graded against the gold answer. Best-of-N gives K independent samples (every step of every finished
path is also scored by the session's PRM, the judge by default); a search of N = K guided by the
session's PRM (beam or dvts, with a value head) gives the final paths it keeps: the candidates such
a search compares, its mistakes among them, which independent samples rarely hold.

The file is append-only JSONL, one problem a line, written whole and flushed as each problem
finishes: a run that is interrupted keeps every finished problem, and the next run skips them. A
line:
  {"id", "problem", "gold", "search": "best-of-n"|"beam"|"dvts",
   "paths": [{"steps": [str], "answer": str|null, "correct": bool, "prm": [float|null],
              "potential": int}]}
(lines without "search" are best-of-n).
Monte-Carlo lines (mc.py) share the reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from edgereason.config import SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.request import Request
from edgereason.engine.result import SearchResult
from edgereason.errors import DamagedFileError
from edgereason.search.dataset import Problem
from edgereason.search.grading import answers_match
from edgereason.util.jsonl import append_line, read_jsonl
from edgereason.util.schema import FLAG, TEXT, Fields, ListOf, Maybe, Number

Progress = Callable[[int, int], None]

# a line as collect writes it, and what the later phases read of it (features.py)
_PATH = Fields(
    {"steps": ListOf(TEXT), "correct": FLAG},
    {
        "answer": Maybe(TEXT),
        "prm": Maybe(ListOf(Maybe(Number(least=0, most=1)))),
        "potential": Number(whole=True, least=1),
        "search": TEXT,
    },
)
ROLLOUT = Fields(
    {"id": TEXT, "problem": TEXT, "gold": TEXT, "paths": ListOf(_PATH)},
    {"search": TEXT, "status": TEXT},
)
DAMAGED = "not a line train-prm wrote; remove that line, or give another rollouts file"


@dataclass(frozen=True)
class Job:
    """One engine request: a problem, optionally continued from a solution prefix."""

    key: str
    problem: Problem
    prefix: str = ""


def merge_rollouts(files: Iterable[Path]) -> list[dict]:
    """One row per problem. A problem in several files (best-of-n samples and beam-search paths of
    it) gets the paths of each, in the order of the files, a path (its steps) once, a path of a
    later file with its line's "search"; within one file a problem's first line counts. Monte-Carlo
    values name paths by index, so the file the mc phase read comes first."""
    rows: dict[str, dict] = {}
    for f in files:
        here: set[str] = set()
        for row in rollout_lines(f):
            if row["id"] in here:
                continue
            here.add(row["id"])
            if row["id"] not in rows:
                rows[row["id"]] = row
                continue
            merged = rows[row["id"]]
            have = {tuple(p["steps"]) for p in merged["paths"]}
            search = row.get("search", "best-of-n")  # a path keeps the search that made it
            merged["paths"] = merged["paths"] + [
                {**p, "search": search} for p in row["paths"] if tuple(p["steps"]) not in have
            ]
    return list(rows.values())


def rollout_lines(path: Path) -> Iterator[dict]:
    """The lines of one rollouts file, checked (ROLLOUT, and a PRM score for each step):
    DamagedFileError names the file, the line and what is wrong."""
    for row in read_jsonl(path, ROLLOUT, DAMAGED):
        for i, p in enumerate(row["paths"]):
            if p.get("prm") is not None and len(p["prm"]) != len(p["steps"]):
                wrong = f"paths[{i}] has {len(p['steps'])} steps and {len(p['prm'])} PRM scores"
                raise DamagedFileError(path, f"the line of problem {row['id']!r}: {wrong}", DAMAGED)
        yield row


def graded_paths(result: SearchResult, gold: str) -> list[dict]:
    return [
        {
            "steps": [t for t, _ in p.steps],
            "answer": p.answer,
            "correct": answers_match(p.answer, gold),
            "prm": [s for _, s in p.steps],
            "potential": p.potential,
        }
        for p in result.paths
    ]


def run_jobs(
    engine: Engine,
    jobs: Iterable[Job],
    config: SearchConfig,
    concurrency: int,
    on_done: Callable[[Job, SearchResult], None],
    total: int,
    progress: Progress | None = None,
) -> int:
    """Serve the jobs on one engine, at most `concurrency` in flight (a closed loop: a finished job
    makes room for the next), calling on_done as each finishes. Returns the number finished. Ctrl-C
    propagates; what on_done wrote stays written."""
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
            live.append(
                (
                    job,
                    engine.submit(
                        job.problem.problem, config, request_id=job.key, prefix=job.prefix
                    ),
                )
            )
        if not live:
            return done
        engine.step()
        for job, req in [x for x in live if x[1].result is not None]:
            live.remove((job, req))  # a finished request has left the engine already
            on_done(job, req.result)
            done += 1
            if progress:
                progress(done, total)


def rollout_config(config: SearchConfig, samples: int) -> SearchConfig:
    """The search that makes one problem's rollouts: `samples` independent samples (best-of-n), or a
    PRM-guided search (beam, dvts) of that size with config's width. ConfigError for a beam that
    cannot be built."""
    return (
        config.with_(beams=samples) if config.grows_tree else config.with_(beams=samples, width=1)
    )


def collect(
    engine: Engine,
    problems: list[Problem],
    out: Path,
    config: SearchConfig,
    concurrency: int,
    progress: Progress | None = None,
) -> int:
    """Append the rollouts (one `config` search each, see rollout_config) of every problem not yet
    in `out`; returns how many problems were added."""
    seen = {row["id"] for row in rollout_lines(out)}
    todo = [p for p in problems if p.id not in seen]

    def write(job: Job, result: SearchResult) -> None:
        append_line(
            out,
            {
                "id": job.problem.id,
                "problem": job.problem.problem,
                "gold": job.problem.answer,
                "search": config.strategy,
                "status": result.status,
                "paths": graded_paths(result, job.problem.answer),
            },
        )

    return run_jobs(
        engine, (Job(p.id, p) for p in todo), config, concurrency, write, len(todo), progress
    )
