"""The train phase of `train-prm`: a value head trained on feature files (torch), written with its
report; the caller prints the summary (Trained)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edgereason import models
from edgereason.backends import require_one_cxx_runtime
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.heads.backbone import file_sha256
from edgereason.heads.value_head import Backbone, save_head
from edgereason.training import features as feats
from edgereason.training.phases import Display, PhaseSettings
from edgereason.training.train import TrainConfig


@dataclass(frozen=True)
class HeadFiles:
    """Where the train phase reads and writes, and what its record names."""

    backbone: str
    features: list[Path]
    out: Path
    work: Path  # the report and the calibration plot
    generator: str  # the record's generator, by its registry name or path
    command: str  # the record's command line
    plot: bool


@dataclass(frozen=True)
class Trained:
    record: dict
    weights: Path
    meta: Path
    report: Path


def train_phase(phase: PhaseSettings, cfg: TrainConfig, files: HeadFiles, show: Display) -> Trained:
    """The train phase: a head on the feature files, written to files.out, its report in work."""
    from edgereason.training.report import plot_calibration, write_report
    from edgereason.training.train import train_head

    if missing := [str(f) for f in files.features if not f.is_file()]:
        raise ConfigError(f"no features at {', '.join(missing)}: run the features phase first")
    instead = "train on a machine with a CPU build"
    require_one_cxx_runtime("training loads torch into this process", instead)
    try:
        import torch
    except ImportError:
        raise ConfigError('training needs torch: pip install "edgereason[torch]"') from None
    if phase.threads:
        torch.set_num_threads(phase.threads)
    try:
        merged = feats.merge([feats.load(p) for p in files.features])
        f = feats.select(merged, tuple(phase.layers or ()))
    except ValueError as e:
        raise ConfigError(f"cannot train on {', '.join(map(str, files.features))}: {e}") from None
    path = models.resolve(files.backbone, allow_pull=False, role="backbone")
    backbone = Backbone(models.display_name(files.backbone), path.name, file_sha256(path))
    try:
        head, record = train_head(f, backbone, cfg, log=show.redraw)
    # torch's allocators: "can't allocate memory" (CPU), "Tried to allocate" (CUDA)
    except RuntimeError as e:
        if "allocate" not in str(e):
            raise
        what = f"training a head of --hidden {cfg.hidden} units on {len(f['x'])} steps"
        raise OutOfMemoryError(f"{what} ran out of memory; lower --hidden") from None
    show.end_line()
    record["generator"] = models.display_name(files.generator)
    record["command"] = files.command
    head = replace(head, record=record)
    weights, meta = save_head(head, files.out)
    report = write_report(files.work / "report.json", record)
    if files.plot:
        title = f"{head.backbone.name} value head: validation steps"
        plot_calibration(files.work / "calibration.png", record, title)
    return Trained(record, weights, meta, report)
