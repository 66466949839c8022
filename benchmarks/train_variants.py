"""Train one value head on one backbone's features (`train`), or keep each backbone's best (`pick`); used by
benchmarks/head_variants.sh.

  train GENERATOR BACKBONE RANK_WEIGHT WORK   WORK/feat-BACKBONE/features-*.npz -> WORK/heads/BACKBONE-rwW.*
  pick GENERATOR WORK BACKBONE...             the best by within-problem validation step AUC -> chosen-BACKBONE.txt

The train phase of `edgereason train-prm` imports the engine, which loads llama.cpp; with the CUDA build, torch
beside it aborts (issue 13). This process stubs llama_cpp out and never loads it.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace
from pathlib import Path

for _name in ("llama_cpp", "llama_cpp.llama_cpp"):
    sys.modules.setdefault(_name, types.ModuleType(_name))

from edgereason import models  # noqa: E402
from edgereason.training import features as feats  # noqa: E402
from edgereason.training.report import write_report  # noqa: E402
from edgereason.training.train import TrainConfig, train_head  # noqa: E402
from edgereason.value_head import Backbone, save_head  # noqa: E402

SHOWN = ("val_step_auc", "val_within_step_auc", "val_outcome_auc", "val_within_outcome_auc", "judge_val_step_auc",
         "judge_val_within_step_auc", "rows", "problems", "val_problems", "best_epoch")


def train(generator: str, backbone: str, rank_weight: float, work: Path) -> None:
    files = sorted((work / f"feat-{backbone}").glob("features-*.npz"))
    spec = models.REGISTRY[backbone]
    head, record = train_head(feats.merge([feats.load(p) for p in files]),
                              Backbone(backbone, spec.filename, spec.sha256), TrainConfig(rank_weight=rank_weight))
    record.update(generator=generator, feature_files=len(files), command=(
        f"benchmarks/head_variants.sh (edgereason train-prm --model {generator} --backbone {backbone} --phases "
        f"features on each rollout shard, then train_head with --rank-weight {rank_weight:g})"))
    name = f"{backbone}-rw{rank_weight:g}"
    save_head(replace(head, record=record), work / "heads" / f"{name}.safetensors")
    write_report(work / "heads" / f"report-{name}.json", record)
    print(json.dumps({k: record[k] for k in SHOWN}))


def pick(generator: str, work: Path, backbones: list[str]) -> None:
    heads = work / "heads"
    for backbone in backbones:
        reports = {p: json.loads(p.read_text()) for p in heads.glob(f"report-{backbone}-rw*.json")}
        for p, r in sorted(reports.items()):
            print(p.stem, {k: r[k] for k in SHOWN[:6]})
        best = max(reports, key=lambda p: reports[p]["val_within_step_auc"] or -1.0)
        chosen = heads / (best.stem.removeprefix("report-") + ".safetensors")
        # the generator's own backbone is the "self" head, the others judge it
        (heads / f"chosen-{generator if backbone == generator else backbone}.txt").write_text(str(chosen))
        print("chosen", chosen)


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], float(sys.argv[4]), Path(sys.argv[5]))
    else:
        pick(sys.argv[2], Path(sys.argv[3]), sys.argv[4:])
