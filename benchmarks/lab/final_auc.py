"""How well a search's PRM ranks the final candidates of one problem: the within-problem AUC of
their scores for right against wrong answers (edgereason/training/metrics.py: within_auc), from the
candidates `edgereason bench` keeps per problem (results.json: per_problem[].paths). For best-of-N
the candidates are the N samples, whatever the PRM; so two PRMs on the same seed score the same
paths, and this compares their ranking on test problems.

Usage: python benchmarks/lab/final_auc.py OUT.json [--first N DATASET] NAME=DIR_GLOB [NAME=DIR_GLOB
...]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from edgereason.search.grading import answers_match
from edgereason.training.metrics import within_auc

sys.path.insert(0, str(Path(__file__).parents[1]))  # benchmarks/: merge_shards
from merge_shards import kept, parse_args  # noqa: E402


def final_auc(dirs: list[str], keep: set[str] | None = None) -> dict[str, dict]:
    """Per policy: problems, candidates, the fraction of candidates right, and the within-problem
    AUC."""
    cols: dict[str, tuple[list, list, list]] = {}
    for d in dirs:
        for run in json.loads((Path(d) / "results.json").read_text())["runs"]:
            scores, right, group = cols.setdefault(run["policy"], ([], [], []))
            for p in kept(run, keep):
                for path in p["paths"]:
                    scores.append(path["score"])
                    right.append(
                        float(
                            path["answer"] is not None and answers_match(path["answer"], p["gold"])
                        )
                    )
                    group.append(f"{d}/{p['id']}")
    table = {}
    for policy, (scores, right, group) in cols.items():
        ids = {g: i for i, g in enumerate(dict.fromkeys(group))}
        y = np.asarray(right)
        table[policy] = {
            "problems": len(ids),
            "candidates": len(y),
            "right_fraction": round(float(y.mean()), 4),
            "within_problem_auc": round(
                within_auc(np.asarray(scores), y, np.asarray([ids[g] for g in group])), 4
            ),
        }
    return table


if __name__ == "__main__":
    out, keep, named = parse_args(sys.argv[1:])
    result = {}
    for name, dirs in named:
        for policy, row in final_auc(dirs, keep).items():
            result[f"{name}/{policy}"] = row
            print(
                f"{name}/{policy:<10} {row['problems']:4d} problems  {row['candidates']:5d} "
                f"candidates  right {row['right_fraction']:.3f}  within-problem AUC "
                f"{row['within_problem_auc']:.3f}"
            )
    out.write_text(json.dumps(result, indent=1) + "\n")
