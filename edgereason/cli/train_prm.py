"""`edgereason train-prm`: make a value-head PRM for a generator from its own rollouts (design.md section 2).

Phases, each resumable and skipped when asked: rollouts (K solutions per problem through the engine, graded) ->
mc (Monte-Carlo values of step prefixes on a subset) -> features (the backbone's hidden state at each step's end)
-> train (torch; the head file and a report). Everything lands in --work; the head in --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from edgereason import models
from edgereason.backends.llamacpp.cxx_runtime import require_one_cxx_runtime
from edgereason.cli.common import search_config
from edgereason.cli.flags_search import add_search_args, beam_count
from edgereason.cli.progress import bar, end_line, pull_progress, redraw
from edgereason.engine.policy import Policy
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.heads.value_head import Backbone, feature_tokens, file_sha256, save_head
from edgereason.search.dataset import Problem, load_problems
from edgereason.session.gpu import DEVICE_SAMPLING_MODES
from edgereason.session.opening import open_session
from edgereason.session.prm_choice import SELF
from edgereason.session.settings import ModelSettings
from edgereason.training import features as feats
from edgereason.training.mc import collect_mc
from edgereason.training.rollouts import collect, merge_rollouts, rollout_config
from edgereason.training.train import TrainConfig
from edgereason.util.files import make_writable_folder
from edgereason.util.jsonl import read_jsonl

PHASES = ("rollouts", "mc", "features", "train")
OUTPUT_NAMES = {"--out": "head.safetensors", "--rollouts": "rollouts.jsonl", "--features": "features.npz"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-prm",
        help="train a value-head PRM on the generator's own rollouts",
        description=__doc__.split("\n\n")[0] + " Phases: " + ", ".join(PHASES) + ".",
    )
    p.add_argument("--model", default=models.DEFAULT_MODEL, help=f"generator (default {models.DEFAULT_MODEL})")
    p.add_argument(
        "--backbone",
        default=SELF,
        metavar="NAME|PATH|self",
        help="weights whose hidden states the head reads (default self: the generator's)",
    )
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
    add_search_args(
        p,
        strategy="best-of-n",
        strategy_help="how the rollouts phase makes a problem's solutions: --samples independent "
        "samples (best-of-n), or the final paths of a search guided by the rollouts' PRM "
        "(beam, dvts: the paths a search with that head keeps, its mistakes among them)",
        beams=False,
    )
    p.set_defaults(func=run, max_tokens=1024, max_steps=20)  # GSM8K solutions are short


def run(args: argparse.Namespace) -> int:
    phases = list(PHASES) if args.phases is None else [s.strip() for s in args.phases.split(",") if s.strip()]
    if not phases:
        raise ConfigError(f"--phases needs at least one of {', '.join(PHASES)}")
    if bad := [s for s in phases if s not in PHASES]:
        raise ConfigError(f"--phases takes {', '.join(PHASES)}; got {', '.join(bad)}")
    if args.beams < 1 or args.concurrency < 1 or args.mc_completions < 1 or args.mc_problems < 0:
        raise ConfigError("--samples, --concurrency and --mc-completions must be at least 1, --mc-problems >= 0")
    if args.layers is not None and (min(args.layers) < 0 or len(set(args.layers)) < len(args.layers)):
        raise ConfigError(f"--layers takes distinct layer indices >= 0, got {' '.join(map(str, args.layers))}")
    if args.phases is not None and "mc" in phases and not args.mc_problems:
        raise ConfigError(
            "the mc phase values the prefixes of --mc-problems N problems; give N >= 1, or leave mc out of --phases"
        )
    backbone = args.model if args.backbone == SELF else args.backbone
    work = Path(args.work) if args.work else models.home() / "train" / models.display_name(args.model)
    if work.exists() and not work.is_dir():
        raise ConfigError(f"--work {work} is a file; give a folder for rollouts, features and the report")
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the --work folder {work}: {e.strerror or e}") from None
    rollout_files = [Path(f) for f in args.rollouts] if args.rollouts else [work / "rollouts.jsonl"]
    out = Path(args.out) if args.out else work / f"head-{models.display_name(backbone)}.safetensors"
    features_files = (
        [Path(f) for f in args.features] if args.features else [work / f"features-{models.display_name(backbone)}.npz"]
    )
    config = search_config(args)
    if "rollouts" in phases:
        config = rollout_config(config, args.beams)  # an impossible beam is refused before any model loads
    # the judge scores every step of every rollout: its AUC on the same steps is the baseline the head must beat;
    # made now for its checks of --threads, --kv-tokens and --gpu-layers, which the features and train phases use too
    settings = ModelSettings(
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
    # checked before any phase: a bad --val-fraction was refused only after hours of rollouts and features
    train = (
        TrainConfig(
            hidden=args.hidden,
            epochs=args.epochs,
            val_fraction=args.val_fraction,
            seed=args.seed,
            rank_weight=args.rank_weight,
        )
        if "train" in phases
        else None
    )
    outputs = {
        "rollouts": ("--rollouts", rollout_files[0]),
        "features": ("--features", features_files[0]),
        "train": ("--out", out),
    }
    for phase in phases:
        if phase in outputs:
            _check_can_write(*outputs[phase])
    if "mc" in phases and "rollouts" not in phases and args.mc_problems:
        _rollouts(rollout_files[:1])  # refuses before a model loads
    problems = _problems(args) if "rollouts" in phases else []  # refused before a model loads (or is pulled)
    if "rollouts" in phases or "mc" in phases:
        _generate(args, settings, phases, work, rollout_files[0], config, problems)
    if "features" in phases:
        _features(args, backbone, _rollouts(rollout_files), list(read_jsonl(work / "mc.jsonl")), features_files[0])
    if train is not None:
        _train(args, train, backbone, features_files, out, work)
    return 0


def _check_can_write(flag: str, path: Path) -> None:
    """Before any phase: an output that cannot be written would be found out only after the work that makes it."""
    if path.suffix == ".gz":  # read through gzip, but appending plain lines would leave a file neither reads
        raise ConfigError(
            f"{flag} {path} is compressed and this phase writes plain lines; give a path without .gz"
            f" (to add to it: zcat {path} > FILE.jsonl, then {flag} FILE.jsonl)"
        )
    if path.is_dir():  # `--out heads/` would write heads.safetensors beside the folder, the others fail at the end
        raise ConfigError(f"{flag} {path} is a folder; give a file path in it, such as {path / OUTPUT_NAMES[flag]}")
    folder = path.parent
    if in_the_way := next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None):
        raise ConfigError(f"cannot write {flag} {path}: {in_the_way} is a file; give a path in a folder")
    try:
        make_writable_folder(folder)
    except OSError as e:
        raise ConfigError(
            f"cannot write {flag} {path}: {e.strerror or e}; give a path in a folder you can write"
        ) from None


def _rollouts(files: list[Path]) -> list[dict]:
    rows = merge_rollouts(files)
    if not rows:
        raise ConfigError(f"no rollouts in {', '.join(map(str, files))}: run the rollouts phase first")
    return rows


def _problems(args: argparse.Namespace) -> list[Problem]:
    if not args.dataset:
        raise ConfigError("the rollouts phase needs --dataset FILE.jsonl (problems with answers)")
    return load_problems(args.dataset, args.limit, args.offset)


def _generate(
    args: argparse.Namespace,
    settings: ModelSettings,
    phases: list[str],
    work: Path,
    rollout_file: Path,
    config,
    problems: list[Problem],
) -> None:
    session = open_session(settings, progress=pull_progress)
    try:
        if "rollouts" in phases:
            added = collect(session.engine(Policy()), problems, rollout_file, config, args.concurrency, bar("rollouts"))
            end_line()
            print(f"rollouts: {added} problems added to {rollout_file}", file=sys.stderr)
        if "mc" in phases and args.mc_problems:
            rows = list(read_jsonl(rollout_file))
            added = collect_mc(
                session.engine(Policy()),
                rows,
                work / "mc.jsonl",
                args.mc_problems,
                args.mc_completions,
                config,
                args.concurrency,
                args.seed,
                bar("mc prefixes"),
            )
            end_line()
            print(f"mc: {added} prefixes added to {work / 'mc.jsonl'}", file=sys.stderr)
    finally:
        session.close()


def _features(args: argparse.Namespace, backbone: str, rollouts: list[dict], mc_rows: list[dict], out: Path) -> None:
    from edgereason.backends.llamacpp import LlamaVerifier, load_model
    from edgereason.backends.llamacpp.layer_capture import LayerCapture
    from edgereason.backends.prm_format import prm_format

    path = models.resolve(backbone, progress=pull_progress, role="backbone")
    model = load_model(str(path), args.gpu_layers)
    try:
        capture = LayerCapture(model.n_embd, model.n_layer, sorted(args.layers)) if args.layers else None
    except ValueError as e:  # LayerCapture knows which layers a head may read
        model.close()
        raise ConfigError(
            f"--layers {' '.join(map(str, args.layers))}: {path.name} has {model.n_layer} layers; {e}"
        ) from None
    verifier = LlamaVerifier(model, prm_format("head"), args.kv_tokens, n_threads=args.threads, capture=capture)
    tokens = feature_tokens(model.n_vocab, model.n_embd, model.eog_ids | model.control_ids, args.seed)
    try:
        f = feats.extract(verifier, tokens, rollouts, mc_rows, progress=bar("features"))
    finally:
        verifier.close()
    end_line()
    if not f:
        raise ConfigError("the rollouts hold no steps to extract features from")
    feats.save(out, f)
    print(f"features: {len(f['x'])} steps of {len(rollouts)} problems -> {out}", file=sys.stderr)


def _train(
    args: argparse.Namespace, cfg: TrainConfig, backbone: str, features_files: list[Path], out: Path, work: Path
) -> None:
    from edgereason.training.report import plot_calibration, write_report
    from edgereason.training.train import train_head

    if missing := [str(f) for f in features_files if not f.is_file()]:
        raise ConfigError(f"no features at {', '.join(missing)}: run the features phase first")
    require_one_cxx_runtime("training loads torch into this process", "train on a machine with a CPU build")
    try:
        import torch
    except ImportError:
        raise ConfigError('training needs torch: pip install "edgereason[torch]"') from None
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        f = feats.select(feats.merge([feats.load(p) for p in features_files]), tuple(args.layers or ()))
    except ValueError as e:
        raise ConfigError(f"cannot train on {', '.join(map(str, features_files))}: {e}") from None
    path = models.resolve(backbone, allow_pull=False, role="backbone")
    try:
        head, record = train_head(
            f, Backbone(models.display_name(backbone), path.name, file_sha256(path)), cfg, log=redraw
        )
    except RuntimeError as e:  # torch's allocators: "can't allocate memory" (CPU), "Tried to allocate" (CUDA)
        if "allocate" not in str(e):
            raise
        raise OutOfMemoryError(
            f"training a head of --hidden {args.hidden} units on {len(f['x'])} steps ran out of memory; lower --hidden"
        ) from None
    end_line()
    record["generator"] = models.display_name(args.model)
    record["command"] = "edgereason " + " ".join(sys.argv[1:])
    head = replace(head, record=record)
    weights, meta = save_head(head, out)
    write_report(work / "report.json", record)
    if not args.no_plot:
        plot_calibration(work / "calibration.png", record, f"{head.backbone.name} value head: validation steps")
    print(
        json.dumps(
            {
                k: record[k]
                for k in (
                    "val_step_auc",
                    "val_within_step_auc",
                    "val_outcome_auc",
                    "judge_val_step_auc",
                    "judge_val_within_step_auc",
                    "judge_val_outcome_auc",
                    "rows",
                    "val_problems",
                )
            },
            default=str,
        )
    )
    print(f"head: {weights} (+ {meta.name}); report: {work / 'report.json'}", file=sys.stderr)
