"""Keep each backbone's best value head of benchmarks/head_variants.sh: the one with the best within-problem
validation step AUC (the pairs a search compares).

Usage: pick_head.py GENERATOR HEADS_DIR BACKBONE...
  reads HEADS_DIR/BACKBONE-rw*/report.json, writes HEADS_DIR/chosen-NAME.txt (the head's path), where NAME is the
  generator for its own backbone (the "self" head) and the backbone otherwise
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHOWN = ("val_step_auc", "val_within_step_auc", "val_outcome_auc", "val_within_outcome_auc", "judge_val_step_auc",
         "judge_val_within_step_auc")


def pick(generator: str, heads: Path, backbones: list[str]) -> None:
    for backbone in backbones:
        reports = {p.parent: json.loads(p.read_text()) for p in heads.glob(f"{backbone}-rw*/report.json")}
        if not reports:
            raise SystemExit(f"no trained head for {backbone} in {heads} (see its */log.txt)")
        for variant, r in sorted(reports.items()):
            print(variant.name, {k: r.get(k) for k in SHOWN})
        best = max(reports, key=lambda v: reports[v]["val_within_step_auc"] or -1.0)
        name = generator if backbone == generator else backbone
        (heads / f"chosen-{name}.txt").write_text(str(best / "head.safetensors"))
        print("chosen", best / "head.safetensors")


if __name__ == "__main__":
    pick(sys.argv[1], Path(sys.argv[2]), sys.argv[3:])
