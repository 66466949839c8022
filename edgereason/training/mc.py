"""Monte-Carlo step values (Math-Shepherd): the value of a step prefix is the fraction of R
completions sampled from it that reach the gold answer. Costly (R searches per prefix), so it runs
on a subset of the rollouts.

Append-only JSONL, one prefix a line: {"id", "path", "steps", "value", "completions"}; `steps` is
how many steps of rollout path `path` the prefix holds. Finished prefixes are skipped on the next
run."""

from __future__ import annotations

import random
from pathlib import Path

from edgereason.config import SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.result import SearchResult
from edgereason.search.dataset import Problem
from edgereason.search.grading import answers_match
from edgereason.training.rollouts import Job, Progress, run_jobs
from edgereason.util.jsonl import append_line, read_jsonl
from edgereason.util.schema import TEXT, Fields, Number

# a line as collect_mc writes it
MC_VALUE = Fields(
    {
        "id": TEXT,
        "path": Number(whole=True, least=0),
        "steps": Number(whole=True, least=1),
        "value": Number(least=0, most=1),
    },
    {"completions": Number(whole=True, least=0)},
)
DAMAGED = "not a line train-prm wrote; remove that line, or the file to measure the values again"


def mc_lines(path: Path) -> list[dict]:
    """The Monte-Carlo values in `path`, checked (MC_VALUE); DamagedFileError names the file, the
    line and what is wrong."""
    return list(read_jsonl(path, MC_VALUE, DAMAGED))


def mc_jobs(rollouts: list[dict], problems: int, seed: int) -> list[tuple[Job, int, int]]:
    """(job, path index, prefix steps) for `problems` rollout problems: per problem one correct and
    one wrong path where both exist (the contrast the head must learn), else one path; every proper
    prefix of each. A path of one step has no proper prefix: one of several steps is drawn where the
    outcome has one, and a problem with none takes no place in the subset."""

    def has_prefix(path: dict) -> bool:
        return len(path["steps"]) > 1

    rng = random.Random(seed)
    chosen = [r for r in rollouts if any(has_prefix(p) for p in r.get("paths", []))]
    rng.shuffle(chosen)
    jobs = []
    for row in chosen[:problems]:
        problem = Problem(row["id"], row["problem"], row["gold"])
        by_outcome: dict[bool, list[int]] = {}
        for i, path in enumerate(row["paths"]):
            by_outcome.setdefault(bool(path["correct"]), []).append(i)
        for indices in by_outcome.values():
            pi = rng.choice([i for i in indices if has_prefix(row["paths"][i])] or indices)
            steps = row["paths"][pi]["steps"]
            for k in range(1, len(steps)):
                jobs.append((Job(f"{row['id']}#{pi}@{k}", problem, "".join(steps[:k])), pi, k))
    return jobs


def collect_mc(
    engine: Engine,
    rollouts: list[dict],
    out: Path,
    problems: int,
    completions: int,
    config: SearchConfig,
    concurrency: int,
    seed: int = 0,
    progress: Progress | None = None,
) -> int:
    """Append the Monte-Carlo value of every chosen prefix not yet in `out`; returns how many were
    added."""
    seen = {f"{r['id']}#{r['path']}@{r['steps']}" for r in mc_lines(out)}
    todo = [(job, pi, k) for job, pi, k in mc_jobs(rollouts, problems, seed) if job.key not in seen]
    where = {job.key: (pi, k) for job, pi, k in todo}
    cfg = config.with_(strategy="best-of-n", beams=completions, width=1)

    def write(job: Job, result: SearchResult) -> None:
        pi, k = where[job.key]
        hits = sum(p.potential for p in result.paths if answers_match(p.answer, job.problem.answer))
        n = sum(p.potential for p in result.paths)
        append_line(
            out,
            {
                "id": job.problem.id,
                "path": pi,
                "steps": k,
                "value": hits / n if n else 0.0,
                "completions": n,
            },
        )

    return run_jobs(
        engine, (job for job, _, _ in todo), cfg, concurrency, write, len(todo), progress
    )
