"""`edgereason train-prm`: make a value-head PRM for a generator from its own rollouts (design.md
section 2).

Phases, each resumable and skipped when asked: rollouts (K solutions per problem through the engine,
graded) -> mc (Monte-Carlo values of step prefixes on a subset) -> features (the backbone's hidden
state at each step's end) -> train (torch; the head file and a report). Everything lands in --work;
the head in --out."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.cli.flags_search import add_search_args, search_config
from edgereason.cli.help import brief
from edgereason.cli.train_prm_flags import PHASES, add_train_prm_args
from edgereason.cli.train_prm_io import (
    DISPLAY,
    check_can_write,
    load_dataset,
    phase_settings,
    print_trained,
    read_rollouts,
)
from edgereason.errors import ConfigError
from edgereason.session.prm_choice import SELF
from edgereason.session.settings import ModelSettings
from edgereason.training.head_phase import HeadFiles, train_phase
from edgereason.training.mc import mc_lines
from edgereason.training.phases import extract_features, generate
from edgereason.training.rollouts import rollout_config
from edgereason.training.train import TrainConfig
from edgereason.util.files import check_no_dangling_link


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-prm",
        help="train a value-head PRM on the generator's own rollouts",
        description=__doc__.split("\n\n")[0] + " Phases: " + ", ".join(PHASES) + ".",
    )
    add_train_prm_args(p)
    add_search_args(
        p,
        strategy="best-of-n",
        strategy_help="how the rollouts phase makes a problem's solutions: --samples independent "
        "samples (best-of-n), or the final paths of a search guided by the rollouts' PRM "
        "(beam, dvts: the paths a search with that head keeps, its mistakes among them)",
        beams=False,
    )
    brief(p, "train-prm")
    p.set_defaults(func=run, max_tokens=1024, max_steps=20)  # GSM8K solutions are short


@dataclass(frozen=True)
class _Files:
    """The files the phases write and read: the first of each list is the one its phase writes."""

    work: Path
    rollouts: list[Path]
    features: list[Path]
    out: Path


def run(args: argparse.Namespace) -> int:
    phases = _phases(args)
    _check_counts(args, phases)
    backbone = args.model if args.backbone == SELF else args.backbone
    files = _files(args, backbone)
    config = search_config(vars(args))
    if "rollouts" in phases:
        # an impossible beam is refused before any model loads
        config = rollout_config(config, args.beams)
    settings = _model_settings(args)
    # checked before any phase: a bad --val-fraction was refused only after hours of rollouts and
    # features
    train = _train_config(args) if "train" in phases else None
    _check_inputs_and_outputs(args, phases, files)
    # refused before a model loads (or is pulled)
    problems = load_dataset(args) if "rollouts" in phases else []
    phase = phase_settings(args)
    if "rollouts" in phases or "mc" in phases:
        generate(settings, phase, phases, files.work, files.rollouts[0], config, problems, DISPLAY)
    if "features" in phases:
        rollouts = read_rollouts(files.rollouts)  # refused before mc.jsonl is read
        mc_rows = mc_lines(files.work / "mc.jsonl")
        extract_features(phase, backbone, rollouts, mc_rows, files.features[0], DISPLAY)
    if train is not None:
        head_files = HeadFiles(
            backbone=backbone,
            features=files.features,
            out=files.out,
            work=files.work,
            generator=args.model,
            command="edgereason " + " ".join(sys.argv[1:]),
            plot=not args.no_plot,
        )
        print_trained(train_phase(phase, train, head_files, DISPLAY))
    return 0


def _files(args: argparse.Namespace, backbone: str) -> _Files:
    """--work, --rollouts, --features and --out, with their defaults in the work folder."""
    work = _work_folder(args)
    name = models.display_name(backbone)
    return _Files(
        work=work,
        rollouts=[Path(f) for f in args.rollouts] if args.rollouts else [work / "rollouts.jsonl"],
        features=[Path(f) for f in args.features]
        if args.features
        else [work / f"features-{name}.npz"],
        out=Path(args.out) if args.out else work / f"head-{name}.safetensors",
    )


def _check_inputs_and_outputs(args: argparse.Namespace, phases: list[str], files: _Files) -> None:
    """Every phase's output can be written, and mc's rollouts read, before a model loads."""
    outputs = {
        "rollouts": ("--rollouts", files.rollouts[0]),
        "features": ("--features", files.features[0]),
        "train": ("--out", files.out),
    }
    for phase in phases:
        if phase in outputs:
            check_can_write(*outputs[phase])
    if "mc" in phases and "rollouts" not in phases and args.mc_problems:
        read_rollouts(files.rollouts[:1])  # refuses before a model loads


def _phases(args: argparse.Namespace) -> list[str]:
    """The phases --phases names, in its order (default all); refuses an unknown one."""
    phases = (
        list(PHASES)
        if args.phases is None
        else [s.strip() for s in args.phases.split(",") if s.strip()]
    )
    if not phases:
        raise ConfigError(f"--phases needs at least one of {', '.join(PHASES)}")
    if bad := [s for s in phases if s not in PHASES]:
        raise ConfigError(f"--phases takes {', '.join(PHASES)}; got {', '.join(bad)}")
    return phases


def _check_counts(args: argparse.Namespace, phases: list[str]) -> None:
    """Counts and layer indices out of range, and an mc phase with no problems to value, are refused
    up front."""
    if args.beams < 1 or args.concurrency < 1 or args.mc_completions < 1 or args.mc_problems < 0:
        raise ConfigError(
            "--samples, --concurrency and --mc-completions must be at least 1, --mc-problems >= 0"
        )
    if args.layers is not None and (
        min(args.layers) < 0 or len(set(args.layers)) < len(args.layers)
    ):
        raise ConfigError(
            f"--layers takes distinct layer indices >= 0, got {' '.join(map(str, args.layers))}"
        )
    if args.phases is not None and "mc" in phases and not args.mc_problems:
        raise ConfigError(
            "the mc phase values the prefixes of --mc-problems N problems; give N >= 1, or leave "
            "mc out of --phases"
        )


def _work_folder(args: argparse.Namespace) -> Path:
    """--work (default $EDGEREASON_HOME/train/MODEL), made if missing."""
    work = (
        Path(args.work) if args.work else models.home() / "train" / models.display_name(args.model)
    )
    check_no_dangling_link("--work", work)
    if work.exists() and not work.is_dir():
        raise ConfigError(
            f"--work {work} is a file; give a folder for rollouts, features and the report"
        )
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the --work folder {work}: {e.strerror or e}") from None
    return work


def _model_settings(args: argparse.Namespace) -> ModelSettings:
    """The rollouts' models. The judge scores every step of every rollout: its AUC on the same steps
    is the baseline the head must beat. Made before any phase for its checks of --threads,
    --kv-tokens and --gpu-layers, which the features and train phases use too."""
    return ModelSettings(
        model=args.model,
        prm=args.prm,
        prm_head=args.prm_head,
        prm_format="auto" if args.prm or args.prm_head else "judge",
        threads=args.threads,
        generator_kv_tokens=args.kv_tokens,
        verifier_kv_tokens=args.kv_tokens,
        n_gpu_layers=args.gpu_layers,
        device_sampling=args.device_sampling,
        backend="llamacpp",
    )  # the features read llama.cpp's layers and logits


def _train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        hidden=args.hidden,
        epochs=args.epochs,
        val_fraction=args.val_fraction,
        seed=args.seed,
        rank_weight=args.rank_weight,
    )
