"""`edgereason train-prm`: make a value-head PRM for a generator from its own rollouts (design.md section 2).

Phases, each resumable and skipped when asked: rollouts (K solutions per problem through the engine, graded) ->
mc (Monte-Carlo values of step prefixes on a subset) -> features (the backbone's hidden state at each step's end)
-> train (torch; the head file and a report). Everything lands in --work; the head in --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgereason import models
from edgereason.cli.common import search_config
from edgereason.cli.flags_search import add_search_args, beam_count
from edgereason.cli.help import brief
from edgereason.cli.train_prm_io import (
    DISPLAY,
    check_can_write,
    load_dataset,
    phase_settings,
    print_trained,
    read_rollouts,
)
from edgereason.errors import ConfigError
from edgereason.session.gpu import DEVICE_SAMPLING_MODES
from edgereason.session.prm_choice import SELF
from edgereason.session.settings import ModelSettings
from edgereason.training.head_phase import HeadFiles, train_phase
from edgereason.training.phases import extract_features, generate
from edgereason.training.rollouts import rollout_config
from edgereason.training.train import TrainConfig
from edgereason.util.jsonl import read_jsonl

PHASES = ("rollouts", "mc", "features", "train")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-prm",
        help="train a value-head PRM on the generator's own rollouts",
        description=__doc__.split("\n\n")[0] + " Phases: " + ", ".join(PHASES) + ".",
    )
    _add_model_args(p)
    _add_rollout_args(p)
    _add_file_args(p)
    _add_head_args(p)
    _add_runtime_args(p)
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


def _add_model_args(p: argparse.ArgumentParser) -> None:
    """The generator, and the backbone whose hidden states the head reads."""
    p.add_argument("--model", default=models.DEFAULT_MODEL, help=f"generator (default {models.DEFAULT_MODEL})")
    p.add_argument(
        "--backbone",
        default=SELF,
        metavar="NAME|PATH|self",
        help="weights whose hidden states the head reads (default self: the generator's)",
    )


def _add_rollout_args(p: argparse.ArgumentParser) -> None:
    """What the rollouts and mc phases read, how many solutions they make, and the PRM that scores them."""
    p.add_argument("--dataset", help="JSONL of {id, problem, answer} to roll out (e.g. GSM8K train)")
    p.add_argument("--limit", type=int, default=None, help="problems to roll out (default all)")
    p.add_argument("--offset", type=int, default=0, help="problems to skip first (default 0)")
    p.add_argument(
        "--samples",
        "--beams",
        dest="beams",
        type=beam_count,
        default=8,
        metavar="N",
        help="solutions per problem: samples, or the beam size N of --strategy beam (default 8)",
    )
    p.add_argument(
        "--prm",
        default=None,
        metavar="NAME|PATH|self",
        help="the rollouts' PRM: it scores every step, and guides --strategy beam (default: the judge "
        "format on the generator's weights; given, or with --prm-head, a value head: the one "
        "given, else the one that ships for it)",
    )
    p.add_argument("--prm-head", default=None, metavar="FILE", help="value head of the rollouts' PRM")
    p.add_argument(
        "--mc-problems",
        type=int,
        default=0,
        help="problems whose step prefixes get Monte-Carlo values (default 0: outcome labels only)",
    )
    p.add_argument("--mc-completions", type=int, default=4, help="completions per prefix (default 4)")
    p.add_argument("--concurrency", type=int, default=16, help="problems in flight at once (default 16)")


def _add_file_args(p: argparse.ArgumentParser) -> None:
    """Where the phases write and read their files, and which phases run."""
    p.add_argument(
        "--work",
        default=None,
        help="folder for rollouts, features and the report (default $EDGEREASON_HOME/train/MODEL)",
    )
    p.add_argument("--out", default=None, help="head file to write (default WORK/head-BACKBONE.safetensors)")
    p.add_argument(
        "--phases", default=None, help=f"comma list of {', '.join(PHASES)} (default all; mc only with --mc-problems)"
    )
    p.add_argument(
        "--rollouts",
        action="append",
        default=None,
        metavar="FILE",
        help="rollout files to read (default WORK/rollouts.jsonl; repeat to merge shards)",
    )
    p.add_argument(
        "--features",
        action="append",
        default=None,
        metavar="FILE",
        help="feature file: the features phase writes the first, the train phase reads them all "
        "(repeat for shards; default WORK/features-BACKBONE.npz)",
    )


def _add_head_args(p: argparse.ArgumentParser) -> None:
    """The head's inputs and its training."""
    p.add_argument(
        "--layers",
        type=int,
        nargs="+",
        default=None,
        metavar="L",
        help="the head reads these middle layers' hidden states instead of the final layer's (e.g. 19 "
        "of the 1.5B's 28); the features phase reads them beside the final layer, so one feature "
        "file serves both kinds of head",
    )
    p.add_argument("--hidden", type=int, default=TrainConfig.hidden, help="hidden units, 0 = linear (default 256)")
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs, help="training epochs (default 40)")
    p.add_argument(
        "--rank-weight",
        type=float,
        default=TrainConfig.rank_weight,
        help="weight of the ranking loss among one problem's paths "
        f"(default {TrainConfig.rank_weight:g}; 0 = pooled loss alone)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=TrainConfig.val_fraction,
        help="problems held out for validation (default 0.15)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the calibration PNG")


def _add_runtime_args(p: argparse.ArgumentParser) -> None:
    """The threads of llama.cpp and torch, the GPU, the KV cache."""
    g = p.add_argument_group("runtime")
    g.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads of llama.cpp, and of torch in the train phase (default: physical cores)",
    )
    g.add_argument("--gpu-layers", type=int, default=0, metavar="N", help="layers on the GPU, 999 = all")
    g.add_argument("--kv-tokens", type=int, default=32768, help="KV tokens per model (default 32768)")
    g.add_argument(
        "--device-sampling",
        default="auto",
        choices=DEVICE_SAMPLING_MODES,
        help="cut each row to its top tokens on the device (as in solve; default auto)",
    )


def run(args: argparse.Namespace) -> int:
    phases = _phases(args)
    _check_counts(args, phases)
    backbone = args.model if args.backbone == SELF else args.backbone
    work = _work_folder(args)
    rollout_files = [Path(f) for f in args.rollouts] if args.rollouts else [work / "rollouts.jsonl"]
    out = Path(args.out) if args.out else work / f"head-{models.display_name(backbone)}.safetensors"
    features_files = (
        [Path(f) for f in args.features] if args.features else [work / f"features-{models.display_name(backbone)}.npz"]
    )
    config = search_config(args)
    if "rollouts" in phases:
        config = rollout_config(config, args.beams)  # an impossible beam is refused before any model loads
    settings = _model_settings(args)
    # checked before any phase: a bad --val-fraction was refused only after hours of rollouts and features
    train = _train_config(args) if "train" in phases else None
    outputs = {
        "rollouts": ("--rollouts", rollout_files[0]),
        "features": ("--features", features_files[0]),
        "train": ("--out", out),
    }
    for phase in phases:
        if phase in outputs:
            check_can_write(*outputs[phase])
    if "mc" in phases and "rollouts" not in phases and args.mc_problems:
        read_rollouts(rollout_files[:1])  # refuses before a model loads
    problems = load_dataset(args) if "rollouts" in phases else []  # refused before a model loads (or is pulled)
    phase = phase_settings(args)
    if "rollouts" in phases or "mc" in phases:
        generate(settings, phase, phases, work, rollout_files[0], config, problems, DISPLAY)
    if "features" in phases:
        rollouts = read_rollouts(rollout_files)  # refused before mc.jsonl is read
        mc_rows = list(read_jsonl(work / "mc.jsonl"))
        extract_features(phase, backbone, rollouts, mc_rows, features_files[0], DISPLAY)
    if train is not None:
        command = "edgereason " + " ".join(sys.argv[1:])
        files = HeadFiles(
            backbone=backbone,
            features=features_files,
            out=out,
            work=work,
            generator=args.model,
            command=command,
            plot=not args.no_plot,
        )
        print_trained(train_phase(phase, train, files, DISPLAY))
    return 0


def _phases(args: argparse.Namespace) -> list[str]:
    """The phases --phases names, in its order (default all); refuses an unknown one."""
    phases = list(PHASES) if args.phases is None else [s.strip() for s in args.phases.split(",") if s.strip()]
    if not phases:
        raise ConfigError(f"--phases needs at least one of {', '.join(PHASES)}")
    if bad := [s for s in phases if s not in PHASES]:
        raise ConfigError(f"--phases takes {', '.join(PHASES)}; got {', '.join(bad)}")
    return phases


def _check_counts(args: argparse.Namespace, phases: list[str]) -> None:
    """Counts and layer indices out of range, and an mc phase with no problems to value, are refused up front."""
    if args.beams < 1 or args.concurrency < 1 or args.mc_completions < 1 or args.mc_problems < 0:
        raise ConfigError("--samples, --concurrency and --mc-completions must be at least 1, --mc-problems >= 0")
    if args.layers is not None and (min(args.layers) < 0 or len(set(args.layers)) < len(args.layers)):
        raise ConfigError(f"--layers takes distinct layer indices >= 0, got {' '.join(map(str, args.layers))}")
    if args.phases is not None and "mc" in phases and not args.mc_problems:
        raise ConfigError(
            "the mc phase values the prefixes of --mc-problems N problems; give N >= 1, or leave mc out of --phases"
        )


def _work_folder(args: argparse.Namespace) -> Path:
    """--work (default $EDGEREASON_HOME/train/MODEL), made if missing."""
    work = Path(args.work) if args.work else models.home() / "train" / models.display_name(args.model)
    if work.exists() and not work.is_dir():
        raise ConfigError(f"--work {work} is a file; give a folder for rollouts, features and the report")
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the --work folder {work}: {e.strerror or e}") from None
    return work


def _model_settings(args: argparse.Namespace) -> ModelSettings:
    """The rollouts' models. The judge scores every step of every rollout: its AUC on the same steps is the baseline
    the head must beat. Made before any phase for its checks of --threads, --kv-tokens and --gpu-layers, which the
    features and train phases use too."""
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
