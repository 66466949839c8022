"""Accuracy averaged over seeds, and paired bootstrap intervals for the differences between
searches: whether a difference on the same problems is larger than what one run's seed and problem
draw move it by.

Usage: python benchmarks/seed_means.py OUT.json [--first N DATASET] NAME=DIR_GLOB [NAME=DIR_GLOB
...]
  Names that differ only in a trailing -sSEED are one search's seeds (q05-beam8-s0, q05-beam8-s1
  -> q05-beam8). Every pair of searches gets mean(A) - mean(B), A the more accurate, over the
  problems that all their runs cover, with a 95% interval from resampling problems (10,000 draws,
  seeded): each problem counts as the fraction of A's seeds that answer it right, less B's.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from merge_shards import kept, parse_args  # noqa: E402

DRAWS = 10_000


def right_by_problem(dirs: list[str], keep: set[str] | None) -> dict[str, dict[str, bool]]:
    """Policy -> problem id -> answered right, over one search's shards."""
    right: dict[str, dict[str, bool]] = defaultdict(dict)
    for d in dirs:
        for run in json.loads((Path(d) / "results.json").read_text())["runs"]:
            right[run["policy"]].update({str(p["id"]): bool(p["correct"]) for p in kept(run, keep)})
    return right


def seed_groups(
    runs: list[tuple[str, list[str]]], keep: set[str] | None
) -> dict[str, list[dict[str, bool]]]:
    """NAME/POLICY (NAME less its -sSEED, as merge_shards.py names runs) -> each seed's answers."""
    groups: dict[str, list[dict[str, bool]]] = defaultdict(list)
    for name, dirs in runs:
        search = re.sub(r"-s\d+$", "", name)
        for policy, right in right_by_problem(dirs, keep).items():
            groups[f"{search}/{policy}"].append(right)
    return dict(groups)


def summarize(groups: dict[str, list[dict[str, bool]]], draws: int = DRAWS) -> dict:
    common = sorted(set.intersection(*(set(r) for seeds in groups.values() for r in seeds)))
    # rate[name][i]: the fraction of name's seeds that answer common[i] right
    rate = {
        name: np.mean([[r[i] for i in common] for r in seeds], axis=0)
        for name, seeds in groups.items()
    }
    picks = np.random.default_rng(0).integers(0, len(common), size=(draws, len(common)))
    searches = {
        name: {
            "seeds": len(seeds),
            "mean": float(rate[name].mean()),
            "per_seed": [sum(r[i] for i in common) / len(common) for r in seeds],
        }
        for name, seeds in groups.items()
    }
    differences = []
    # the better one first
    for a, b in combinations(sorted(groups, key=lambda name: -rate[name].mean()), 2):
        d = rate[a] - rate[b]
        low, high = np.percentile(d[picks].mean(axis=1), [2.5, 97.5])
        differences.append(
            {"a": a, "b": b, "mean": float(d.mean()), "ci95": [float(low), float(high)]}
        )
    return {"problems": len(common), "searches": searches, "differences": differences}


def main(argv: list[str]) -> None:
    out, keep, runs = parse_args(argv)
    result = summarize(seed_groups(runs, keep))
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['problems']} problems")
    for name, s in result["searches"].items():
        seeds = " / ".join(f"{a:.1%}" for a in s["per_seed"])
        print(f"{name:24s} {s['mean']:6.1%}  ({s['seeds']} seeds: {seeds})")
    for d in result["differences"]:
        low, high = d["ci95"]
        print(
            f"{d['a']} - {d['b']}: {d['mean'] * 100:+.1f} points (95% interval {low * 100:+.1f} to "
            f"{high * 100:+.1f})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
