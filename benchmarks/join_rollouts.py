"""Join the rollout shards of time-boxed `train-prm --phases rollouts` processes into one gzip-compressed JSONL: the
problems each finished (status done), whole lines only (a process its box stopped may leave its last line cut).

  python3 benchmarks/join_rollouts.py OUT.jsonl.gz SHARD.jsonl [SHARD.jsonl ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from edgereason.files import write_atomic
from edgereason.jsonl import read_jsonl


def join(shards: list[Path], out: Path) -> int:
    """Write the shards' finished problems to `out` in shard order; the count of problems written."""
    rows = [row for shard in shards for row in read_jsonl(shard) if row.get("status") == "done"]

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)

    write_atomic(out, write)
    return len(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the joined file (.jsonl.gz)")
    ap.add_argument("shards", nargs="+", type=Path, help="rollout shards (.jsonl)")
    args = ap.parse_args(argv)
    print(f"{join(args.shards, args.out)} problems -> {args.out}")


if __name__ == "__main__":
    main()
