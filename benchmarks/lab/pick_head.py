"""Keep each backbone's best value head of benchmarks/lab/head_variants.sh or layer_heads.sh: by
default the one with the best within-problem validation step AUC (the pairs a search compares); with
--and-final, the best sum of that and the within-problem AUC of the final steps (the pairs the vote
among finished paths compares).

Usage: pick_head.py [--variants GLOB] [--and-final] GENERATOR HEADS_DIR BACKBONE...
  reads HEADS_DIR/GLOB/report.json (GLOB: BACKBONE-rw* by default; {backbone} is replaced), writes
  HEADS_DIR/chosen-NAME.txt (the head's path), where NAME is the generator for its own backbone
  (the "self" head) and the backbone otherwise
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SHOWN = (
    "val_step_auc",
    "val_within_step_auc",
    "val_outcome_auc",
    "val_within_outcome_auc",
    "judge_val_step_auc",
    "judge_val_within_step_auc",
)


def merit(report: dict, and_final: bool) -> float:
    keys = (
        ("val_within_step_auc", "val_within_outcome_auc") if and_final else ("val_within_step_auc",)
    )
    return sum(report.get(k) or 0.0 for k in keys)


def pick(generator: str, heads: Path, backbones: list[str], variants: str, and_final: bool) -> None:
    for backbone in backbones:
        reports = {
            p.parent: json.loads(p.read_text())
            for p in heads.glob(variants.format(backbone=backbone) + "/report.json")
        }
        if not reports:
            raise SystemExit(f"no trained head for {backbone} in {heads} (see its */log.txt)")
        for variant, r in sorted(reports.items()):
            print(variant.name, {k: r.get(k) for k in SHOWN})
        best = max(reports, key=lambda v: merit(reports[v], and_final))
        name = generator if backbone == generator else backbone
        (heads / f"chosen-{name}.txt").write_text(str(best / "head.safetensors"))
        print("chosen", best / "head.safetensors")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("generator")
    p.add_argument("heads", type=Path)
    p.add_argument("backbones", nargs="+")
    p.add_argument("--variants", default="{backbone}-rw*")
    p.add_argument("--and-final", action="store_true")
    a = p.parse_args()
    pick(a.generator, a.heads, a.backbones, a.variants, a.and_final)
