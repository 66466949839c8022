"""`edgereason train-prm`'s files and flags around its phases (training/phases.py,
training/head_phase.py): the checks made before any phase runs, the flags as the phases' settings,
their display, and what the train phase prints."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edgereason.cli.progress import bar, end_line, pull_progress, redraw
from edgereason.errors import ConfigError
from edgereason.search.dataset import Problem, load_problems
from edgereason.training.head_phase import Trained
from edgereason.training.phases import Display, PhaseSettings
from edgereason.training.rollouts import merge_rollouts
from edgereason.util.files import check_no_dangling_link, make_writable_folder
from edgereason.util.terminal import shown_path

OUTPUT_NAMES = {
    "--out": "head.safetensors",
    "--rollouts": "rollouts.jsonl",
    "--features": "features.npz",
}


def check_can_write(flag: str, path: Path) -> None:
    """Before any phase: an output that cannot be written would be found out only after the work
    that makes it."""
    check_no_dangling_link(flag, path)
    # read through gzip, but appending plain lines would leave a file neither reads
    if path.suffix == ".gz":
        raise ConfigError(
            f"{flag} {path} is compressed and this phase writes plain lines; give a path without "
            f".gz (to add to it: zcat {path} > FILE.jsonl, then {flag} FILE.jsonl)"
        )
    # `--out heads/` would write heads.safetensors beside the folder, the others fail at the end
    if path.is_dir():
        raise ConfigError(
            f"{flag} {path} is a folder; give a file path in it, such as "
            f"{path / OUTPUT_NAMES[flag]}"
        )
    folder = path.parent
    if in_the_way := next(
        (p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None
    ):
        raise ConfigError(
            f"cannot write {flag} {path}: {in_the_way} is a file; give a path in a folder"
        )
    try:
        make_writable_folder(folder)
    except OSError as e:
        raise ConfigError(
            f"cannot write {flag} {path}: {e.strerror or e}; give a path in a folder you can write"
        ) from None


def read_rollouts(files: list[Path]) -> list[dict]:
    rows = merge_rollouts(files)
    if not rows:
        raise ConfigError(
            f"no rollouts in {', '.join(map(str, files))}: run the rollouts phase first"
        )
    return rows


def load_dataset(args: argparse.Namespace) -> list[Problem]:
    if not args.dataset:
        raise ConfigError("the rollouts phase needs --dataset FILE.jsonl (problems with answers)")
    return load_problems(args.dataset, args.limit, args.offset)


def phase_settings(args: argparse.Namespace) -> PhaseSettings:
    return PhaseSettings(
        concurrency=args.concurrency,
        mc_problems=args.mc_problems,
        mc_completions=args.mc_completions,
        seed=args.seed,
        threads=args.threads,
        gpu_layers=args.gpu_layers,
        kv_tokens=args.kv_tokens,
        layers=tuple(args.layers) if args.layers is not None else None,
    )


def say(line: str) -> None:
    print(line, file=sys.stderr)


DISPLAY = Display(bar=bar, end_line=end_line, pull_progress=pull_progress, say=say, redraw=redraw)

# the record's figures printed as one JSON object on stdout
SUMMARY = (
    "val_step_auc",
    "val_within_step_auc",
    "val_outcome_auc",
    "judge_val_step_auc",
    "judge_val_within_step_auc",
    "judge_val_outcome_auc",
    "rows",
    "val_problems",
)


def print_trained(trained: Trained) -> None:
    """The head's figures on stdout, its files on stderr."""
    print(json.dumps({k: trained.record[k] for k in SUMMARY}, default=str))
    head = f"head: {shown_path(trained.weights)} (+ {shown_path(trained.meta.name)})"
    print(f"{head}; report: {shown_path(trained.report)}", file=sys.stderr)
