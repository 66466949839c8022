"""Merge bench results of problem shards (one `edgereason bench --offset/--limit` process each, run
side by side on one GPU) into one table: accuracy over all problems (or the dataset's first N), the
right answer among the final paths, tokens summed, wall time of the slowest shard.

Usage: python benchmarks/merge_shards.py OUT.json [--first N DATASET] NAME=DIR_GLOB [NAME=DIR_GLOB
...]
  --first N DATASET   count only the problems among DATASET's first N lines (the last shard may
                      run past them)
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from edgereason.search.grading import answers_match


def parse_args(argv: list[str]) -> tuple[Path, set[str] | None, list[tuple[str, list[str]]]]:
    """OUT.json [--first N DATASET] NAME=DIR_GLOB...: the output, the ids kept (None: all), and each
    name's result folders. Also read by benchmarks/vote_rules.py."""
    out, specs, keep = Path(argv[0]), argv[1:], None
    if specs[:1] == ["--first"]:
        with open(specs[2], encoding="utf-8") as f:
            keep = {str(json.loads(line)["id"]) for _, line in zip(range(int(specs[1])), f)}
        specs = specs[3:]
    if bad := [spec for spec in specs if "=" not in spec]:
        sys.exit(f"merge_shards: give NAME=DIR_GLOB, got {' '.join(bad)}")
    # a name may hold '=' ("beam M=4"), a folder rarely does
    named = [spec.rsplit("=", 1) for spec in specs]
    return (
        out,
        keep,
        [
            (name, sorted(d for d in glob.glob(pattern) if (Path(d) / "results.json").is_file()))
            for name, pattern in named
        ],
    )


def kept(run: dict, keep: set[str] | None) -> list[dict]:
    """The run's problems among the kept ids."""
    return [p for p in run["per_problem"] if keep is None or str(p["id"]) in keep]


def merge(dirs: list[str], keep: set[str] | None = None) -> dict[str, dict]:
    """Per policy: problems, correct, oracle (a right answer among the final paths), generated and
    final tokens of the kept problems; prm_tokens and wall_s are of the whole shards."""
    runs: dict[str, dict] = {}
    for d in dirs:
        data = json.loads((Path(d) / "results.json").read_text())
        for run in data["runs"]:
            m = runs.setdefault(
                run["policy"],
                {
                    "problems": 0,
                    "correct": 0,
                    "oracle": 0,
                    "generated_tokens": 0,
                    "final_tokens": 0,
                    "wall_s": 0.0,
                    "prm_tokens": 0,
                    "shards": 0,
                },
            )
            for p in kept(run, keep):
                m["problems"] += 1
                m["correct"] += bool(p["correct"])
                m["oracle"] += any(
                    answers_match(q["answer"], p["gold"]) for q in p.get("paths") or []
                )
                m["generated_tokens"] += p["tokens"]
                m["final_tokens"] += p["final_tokens"]
            m["prm_tokens"] += run["prm_tokens"]
            m["wall_s"] = max(m["wall_s"], run["wall_s"])
            m["shards"] += 1
    for m in runs.values():
        n = m["problems"] or 1
        m["accuracy"], m["oracle_accuracy"] = m["correct"] / n, m["oracle"] / n
        m["tokens_per_problem"] = m["generated_tokens"] / n
    return runs


def main(argv: list[str]) -> int:
    out, keep, named = parse_args(argv)
    table = {}
    for name, dirs in named:
        for policy, m in merge(dirs, keep).items():
            table[f"{name}/{policy}"] = m
    out.write_text(json.dumps(table, indent=1) + "\n")
    for key, m in table.items():
        print(
            f"{key:32s} {m['correct']:4d}/{m['problems']:<4d} {100 * m['accuracy']:5.1f}%  right "
            f"among finals {100 * m['oracle_accuracy']:5.1f}%  {m['tokens_per_problem']:6.0f} "
            f"tok/problem  {m['wall_s']:6.1f} s (slowest shard)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
