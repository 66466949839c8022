"""The phases of `edgereason train-prm` (rollouts and mc, features, train) and the checks made before any runs."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from edgereason import models
from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.cli.progress import bar, end_line, pull_progress, redraw
from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.heads.value_head import Backbone, feature_tokens, file_sha256, save_head
from edgereason.search.dataset import Problem, load_problems
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings
from edgereason.training import features as feats
from edgereason.training.mc import collect_mc
from edgereason.training.rollouts import collect, merge_rollouts
from edgereason.training.train import TrainConfig
from edgereason.util.files import make_writable_folder
from edgereason.util.jsonl import read_jsonl

OUTPUT_NAMES = {"--out": "head.safetensors", "--rollouts": "rollouts.jsonl", "--features": "features.npz"}


def check_can_write(flag: str, path: Path) -> None:
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


def read_rollouts(files: list[Path]) -> list[dict]:
    rows = merge_rollouts(files)
    if not rows:
        raise ConfigError(f"no rollouts in {', '.join(map(str, files))}: run the rollouts phase first")
    return rows


def load_dataset(args: argparse.Namespace) -> list[Problem]:
    if not args.dataset:
        raise ConfigError("the rollouts phase needs --dataset FILE.jsonl (problems with answers)")
    return load_problems(args.dataset, args.limit, args.offset)


def generate(
    args: argparse.Namespace,
    settings: ModelSettings,
    phases: list[str],
    work: Path,
    rollout_file: Path,
    config: SearchConfig,
    problems: list[Problem],
) -> None:
    """The rollouts and mc phases, on one session of the generator and the rollouts' PRM."""
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


def extract_features(
    args: argparse.Namespace, backbone: str, rollouts: list[dict], mc_rows: list[dict], out: Path
) -> None:
    """The features phase: the backbone's features of every rollout step, written to out."""
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


def train_phase(
    args: argparse.Namespace, cfg: TrainConfig, backbone: str, features_files: list[Path], out: Path, work: Path
) -> None:
    """The train phase: a head on the feature files, written to out, with its report in work."""
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
