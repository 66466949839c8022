"""`edgereason train-prm`'s flags, grouped as the phases use them: the models, the rollouts, the
files, the head, the runtime."""

from __future__ import annotations

import argparse

from edgereason import models
from edgereason.cli.flags_search import beam_count
from edgereason.session.gpu import DEVICE_SAMPLING_MODES
from edgereason.session.prm_choice import SELF
from edgereason.training.train import TrainConfig

PHASES = ("rollouts", "mc", "features", "train")


def add_train_prm_args(p: argparse.ArgumentParser) -> None:
    """Every flag of train-prm but the search's (flags_search.add_search_args adds those)."""
    _add_model_args(p)
    _add_rollout_args(p)
    _add_file_args(p)
    _add_head_args(p)
    _add_runtime_args(p)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    """The generator, and the backbone whose hidden states the head reads."""
    p.add_argument(
        "--model", default=models.DEFAULT_MODEL, help=f"generator (default {models.DEFAULT_MODEL})"
    )
    p.add_argument(
        "--backbone",
        default=SELF,
        metavar="NAME|PATH|self",
        help="weights whose hidden states the head reads (default self: the generator's)",
    )


def _add_rollout_args(p: argparse.ArgumentParser) -> None:
    """What the rollouts and mc phases read, how many solutions they make, and the PRM that scores
    them."""
    p.add_argument(
        "--dataset", help="JSONL of {id, problem, answer} to roll out (e.g. GSM8K train)"
    )
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
        help="the rollouts' PRM: it scores every step, and guides --strategy beam (default: the "
        "judge format on the generator's weights; given, or with --prm-head, a value head: the one "
        "given, else the one that ships for it)",
    )
    p.add_argument(
        "--prm-head", default=None, metavar="FILE", help="value head of the rollouts' PRM"
    )
    p.add_argument(
        "--mc-problems",
        type=int,
        default=0,
        help="problems whose step prefixes get Monte-Carlo values (default 0: outcome labels only)",
    )
    p.add_argument(
        "--mc-completions", type=int, default=4, help="completions per prefix (default 4)"
    )
    p.add_argument(
        "--concurrency", type=int, default=16, help="problems in flight at once (default 16)"
    )


def _add_file_args(p: argparse.ArgumentParser) -> None:
    """Where the phases write and read their files, and which phases run."""
    p.add_argument(
        "--work",
        default=None,
        help="folder for rollouts, features and the report (default $EDGEREASON_HOME/train/MODEL)",
    )
    p.add_argument(
        "--out", default=None, help="head file to write (default WORK/head-BACKBONE.safetensors)"
    )
    p.add_argument(
        "--phases",
        default=None,
        help=f"comma list of {', '.join(PHASES)} (default all; mc only with --mc-problems)",
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
        help="the head reads these middle layers' hidden states instead of the final layer's (e.g. "
        "19 of the 1.5B's 28); the features phase reads them beside the final layer, so one "
        "feature file serves both kinds of head",
    )
    p.add_argument(
        "--hidden",
        type=int,
        default=TrainConfig.hidden,
        help="hidden units, 0 = linear (default 256)",
    )
    p.add_argument(
        "--epochs", type=int, default=TrainConfig.epochs, help="training epochs (default 40)"
    )
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
        help="CPU threads of llama.cpp, and of torch in the train phase (default: the physical "
        "cores other processes leave free at start; torch: physical cores)",
    )
    g.add_argument(
        "--gpu-layers", type=int, default=0, metavar="N", help="layers on the GPU, 999 = all"
    )
    g.add_argument(
        "--kv-tokens", type=int, default=32768, help="KV tokens per model (default 32768)"
    )
    g.add_argument(
        "--device-sampling",
        default="auto",
        choices=DEVICE_SAMPLING_MODES,
        help="cut each row to its top tokens on the device (as in solve; default auto)",
    )
