"""Merge bench results of problem shards (one `edgereason bench --offset/--limit` process each, run side by side
on one GPU) into one table: accuracy over all problems, tokens summed, wall time of the slowest shard.

Usage: python benchmarks/merge_shards.py OUT.json NAME=DIR_GLOB [NAME=DIR_GLOB ...]
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path


def merge(dirs: list[str]) -> dict[str, dict]:
    runs: dict[str, dict] = {}
    for d in dirs:
        data = json.loads((Path(d) / "results.json").read_text())
        for run in data["runs"]:
            m = runs.setdefault(run["policy"], {"problems": 0, "correct": 0, "generated_tokens": 0,
                                                "final_tokens": 0, "wall_s": 0.0, "prm_tokens": 0, "shards": 0})
            for k in ("problems", "correct", "generated_tokens", "final_tokens", "prm_tokens"):
                m[k] += run[k]
            m["wall_s"] = max(m["wall_s"], run["wall_s"])
            m["shards"] += 1
    for m in runs.values():
        m["accuracy"] = m["correct"] / m["problems"] if m["problems"] else 0.0
        m["tokens_per_problem"] = m["generated_tokens"] / m["problems"] if m["problems"] else 0.0
    return runs


def main(argv: list[str]) -> int:
    out, specs = Path(argv[0]), argv[1:]
    table = {}
    for spec in specs:
        name, pattern = spec.split("=", 1)
        dirs = sorted(d for d in glob.glob(pattern) if (Path(d) / "results.json").is_file())
        for policy, m in merge(dirs).items():
            table[f"{name}/{policy}"] = m
    out.write_text(json.dumps(table, indent=1) + "\n")
    for key, m in table.items():
        print(f"{key:40s} {m['correct']:4d}/{m['problems']:<4d} {100 * m['accuracy']:5.1f}%  "
              f"{m['tokens_per_problem']:8.0f} tok/problem  {m['wall_s']:7.1f} s (slowest shard)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
