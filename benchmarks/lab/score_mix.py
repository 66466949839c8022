"""Do two verifiers together choose better than either? Readings of finetune_verifier's scores
files, each alone and the mean of their step scores, on the paths they all scored.

  python3 -m benchmarks.lab.score_mix A/scores-lora-epoch2.jsonl.gz \\
      B/scores-lora-epoch1.jsonl.gz [...]

One line a reader: step AUC, within-problem step and final AUC, best-of-n's weighted vote (--agg
last, mean) and a right answer among the paths (finetune_verifier.reading). (From the repository
root, as a module.) """

from __future__ import annotations

import argparse
from pathlib import Path

from edgereason import models  # noqa: F401  # first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)

# isort: split

import numpy as np

from benchmarks.lab.finetune_verifier import reading
from edgereason.util.jsonl import read_jsonl


def scores(path: Path) -> dict[tuple[int, int], dict]:
    """One line a path, keyed by (rollout row, path)."""
    return {(line["row"], line["path"]): line for line in read_jsonl(path)}


def mean_of(readers: list[dict[tuple[int, int], dict]]) -> list[dict]:
    """The paths every reader scored, each with the mean of their step scores."""
    keys = sorted(set.intersection(*(set(r) for r in readers)))
    return [
        readers[0][k] | {"head": np.mean([r[k]["head"] for r in readers], axis=0).tolist()}
        for k in keys
    ]


def line(name: str, lines: list[dict]) -> str:
    r = reading(lines)
    v = r["votes"]
    return (
        f"{name}: {r['paths']} paths, step AUC {r['step_auc']}, within-problem step "
        f"{r['within_step_auc']}, final {r['within_final_auc']}; weighted vote (last) "
        f"{v['weighted, --agg last']}, (mean) {v['weighted, --agg mean']}; a right answer among "
        f"the paths {v['right answer among the paths']}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scores", nargs="+", type=Path, help="finetune_verifier's scores-*.jsonl.gz")
    args = ap.parse_args(argv)
    readers = [scores(p) for p in args.scores]
    for path, reader in zip(args.scores, readers):
        print(line(str(path), list(reader.values())))
    if len(readers) > 1:
        print(line("mean of all", mean_of(readers)))


if __name__ == "__main__":
    main()
