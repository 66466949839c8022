"""Accuracy of one search under several final-answer rules, from the final candidates that
`edgereason bench` keeps per problem (results.json: per_problem[].paths, best first): the same
paths, so the rules differ only in how they pick the answer.

  best      the best-scored candidate's answer (`--vote best`)
  weighted  the answer with the largest sum of candidate scores (`--vote weighted`)
  majority  the answer most candidates reach, ties to the better-scored
  weighted --agg HOW   (min, mean, prod; where results.json keeps each path's step scores) the
            weighted vote with each candidate's step scores added up another way (bench --agg).
            For best-of-n that is exactly the other setting's answer, its samples not depending
            on the PRM; for a search the PRM guides it only re-ranks the finals the run's own
            --agg kept

Usage: python benchmarks/vote_rules.py OUT.json [--first N DATASET] NAME=DIR_GLOB [NAME=DIR_GLOB
...]
  --first N DATASET   count only the problems among DATASET's first N lines
                      (benchmarks/merge_shards.py)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from edgereason.engine.result import FinalPath, vote
from edgereason.search.grading import answers_match
from edgereason.tree import aggregate

sys.path.insert(0, str(Path(__file__).parent))
from merge_shards import kept, parse_args  # noqa: E402

AGGREGATIONS = ("min", "mean", "prod")  # besides the run's own, in "score"


def pick(paths: list[dict], rule: str) -> str | None:
    """The engine's own rule (edgereason/engine/result.py) on a results.json candidate list."""
    if rule == "best":
        return paths[0]["answer"] if paths else None
    if rule.startswith("weighted --agg "):
        how = rule.rsplit(" ", 1)[1]
        scored = [aggregate([s for s in p["step_scores"] if s is not None], how) for p in paths]
        # best first: vote's ties go to the first
        order = sorted(range(len(paths)), key=lambda i: -scored[i])
        finals = [
            FinalPath([], scored[i], paths[i]["answer"], i, paths[i]["potential"]) for i in order
        ]
        return vote(finals, by_score=True)
    finals = [
        FinalPath([], p["score"], p["answer"], i, p["potential"]) for i, p in enumerate(paths)
    ]
    return vote(finals, by_score=rule == "weighted")


def rules_for(paths: list[dict]) -> tuple[str, ...]:
    base = ("best", "weighted", "majority")
    return (
        base + tuple(f"weighted --agg {a}" for a in AGGREGATIONS)
        if all("step_scores" in p for p in paths)
        else base
    )


def rules_table(dirs: list[str], keep: set[str] | None = None) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for d in dirs:
        for run in json.loads((Path(d) / "results.json").read_text())["runs"]:
            row = table.setdefault(
                run["policy"], {"problems": 0, "best": 0, "weighted": 0, "majority": 0, "oracle": 0}
            )
            for p in kept(run, keep):
                row["problems"] += 1
                for rule in rules_for(p["paths"]):
                    row[rule] = row.get(rule, 0) + bool(
                        answers_match(pick(p["paths"], rule), p["gold"])
                    )
                row["oracle"] += any(answers_match(c["answer"], p["gold"]) for c in p["paths"])
    return table


def main(argv: list[str]) -> int:
    out, keep, named = parse_args(argv)
    table = {}
    for name, dirs in named:
        for policy, row in rules_table(dirs, keep).items():
            table[f"{name}/{policy}"] = row
            n = row["problems"] or 1
            print(
                f"{name}/{policy:10s} n={row['problems']:4d}  "
                + "  ".join(
                    f"{rule} {100 * row[rule] / n:5.1f}%" for rule in row if rule != "problems"
                )
            )
    out.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
