"""Accuracy against compute over several benches (one per strategy x N x PRM, each maybe sharded
over processes): one point per search, drawn by the bench's own plot
(edgereason/evaluation/plots.py).

Usage: python benchmarks/accuracy_compute.py OUT.png [--first N DATASET] LABEL=DIR_GLOB
[LABEL=DIR_GLOB ...]
  A bench that ran several policies gives a point per policy ("LABEL policy"). Problems are
  counted once by id (shards may overlap); latency is the mean over problems. --first as in
  merge_shards.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from edgereason.evaluation.plots import accuracy_compute

sys.path.insert(0, str(Path(__file__).parent))
from merge_shards import kept, parse_args  # noqa: E402


def searches(label: str, dirs: list[str], keep: set[str] | None) -> list[dict]:
    by_policy: dict[str, dict[str, dict]] = {}
    beams: dict[str, int] = {}
    for d in dirs:
        for run in json.loads((Path(d) / "results.json").read_text())["runs"]:
            beams[run["policy"]] = run["beams"]
            for p in kept(run, keep):
                by_policy.setdefault(run["policy"], {})[p["id"]] = p
    out = []
    for policy, problems in by_policy.items():
        pp = list(problems.values())
        out.append(
            {
                "label": label if len(by_policy) == 1 else f"{label} {policy}",
                "policy": policy,
                "beams": beams[policy],
                "problems": len(pp),
                "accuracy": sum(p["correct"] for p in pp) / len(pp),
                "generated_tokens": sum(p["tokens"] for p in pp),
                "latency_s_mean": sum(p["latency"] for p in pp) / len(pp),
            }
        )
    return out


def main(argv: list[str]) -> int:
    out, keep, named = parse_args(argv)
    runs = [r for label, dirs in named for r in searches(label, dirs, keep)]
    for r in runs:
        print(
            f"{r['label']:28s} n={r['problems']:4d} accuracy {100 * r['accuracy']:5.1f}%  "
            f"{r['generated_tokens'] / r['problems']:7.0f} tok/problem  {r['latency_s_mean']:6.1f} "
            "s/problem"
        )
    accuracy_compute(out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
