"""Best-of-K accuracy estimated from a best-of-N run (K <= N): the answer rules on random K-subsets
of each problem's N final candidates. Best-of-N's candidates are independent samples, each scored on
its own, so a K-subset is a best-of-K search's candidates; 30 subsets a problem (seeded), all of
them where K = N.

Usage: python benchmarks/fewer_samples.py OUT.json --k 1,2,4,8 [--first N DATASET] NAME=DIR_GLOB
[...]"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from edgereason.search.grading import answers_match

sys.path.insert(0, str(Path(__file__).parent))
from merge_shards import kept, parse_args  # noqa: E402
from vote_rules import pick  # noqa: E402

SUBSETS = 30
RULES = ("weighted", "majority")


def estimate(dirs: list[str], ks: list[int], keep: set[str] | None) -> dict[int, dict[str, float]]:
    rng = random.Random(0)
    hits = {k: {rule: 0 for rule in RULES} for k in ks}
    draws = {k: 0 for k in ks}
    for d in dirs:
        for run in json.loads((Path(d) / "results.json").read_text())["runs"]:
            for p in kept(run, keep):
                paths = p["paths"]
                for k in ks:
                    if k > len(paths):
                        raise SystemExit(
                            f"{d}: a problem has {len(paths)} candidates, fewer than K = {k}"
                        )
                    for _ in range(SUBSETS if k < len(paths) else 1):
                        sub = sorted(rng.sample(range(len(paths)), k))  # keeps the best-first order
                        draws[k] += 1
                        for rule in RULES:
                            hits[k][rule] += answers_match(
                                pick([paths[i] for i in sub], rule), p["gold"]
                            )
    return {k: {rule: hits[k][rule] / max(1, draws[k]) for rule in RULES} for k in ks}


def main(argv: list[str]) -> int:
    i = argv.index("--k")
    ks = [int(k) for k in argv[i + 1].split(",")]
    out, keep, named = parse_args(argv[:i] + argv[i + 2 :])
    table = {}
    for name, dirs in named:
        table[name] = estimate(dirs, ks, keep)
        print(
            f"{name:20s} "
            + "  ".join(
                f"K={k}: weighted {100 * r['weighted']:5.1f}% majority {100 * r['majority']:5.1f}%"
                for k, r in table[name].items()
            )
        )
    out.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
