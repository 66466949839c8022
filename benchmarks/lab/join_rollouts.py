"""Join the rollout shards of time-boxed `train-prm --phases rollouts` processes into one
gzip-compressed JSONL: the problems each finished (status done), whole lines only (a process its box
stopped may leave its last line cut).

  python3 benchmarks/lab/join_rollouts.py OUT.jsonl.gz SHARD.jsonl [SHARD.jsonl ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgereason.util.jsonl import read_jsonl

# the repository root: run as a script, too
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.lab.jsonl_gz import write_jsonl_gz  # noqa: E402


def join(shards: list[Path], out: Path) -> int:
    """Write the shards' finished problems to `out` in shard order; the count of problems
    written."""
    rows = [row for shard in shards for row in read_jsonl(shard) if row.get("status") == "done"]
    write_jsonl_gz(out, rows)
    return len(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the joined file (.jsonl.gz)")
    ap.add_argument("shards", nargs="+", type=Path, help="rollout shards (.jsonl)")
    args = ap.parse_args(argv)
    print(f"{join(args.shards, args.out)} problems -> {args.out}")


if __name__ == "__main__":
    main()
