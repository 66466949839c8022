"""The training report: the record as JSON and a calibration plot (PNG) of the head against the
rollout PRM."""

from __future__ import annotations

import json
from pathlib import Path

from edgereason.util.jsonl import without_nan


def write_report(path: Path, record: dict) -> Path:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(without_nan(record), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def plot_calibration(path: Path, record: dict, title: str) -> Path:
    """Reliability diagram on the validation steps (from the record's calibration bins): mean score
    against the fraction of steps on right paths, for the head and for the rollout PRM (the
    judge)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--", label="calibrated")
    for name, key in (("value head", "val_calibration"), ("judge", "judge_val_calibration")):
        pts = record.get(key) or []
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel("predicted P(path reaches the right answer)")
    ax.set_ylabel("fraction of steps on right paths")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
