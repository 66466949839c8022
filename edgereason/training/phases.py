"""The phases of `train-prm` that read models: rollouts and mc (one session of the generator and
the rollouts' PRM) and features (the backbone's hidden states at each step's end). They take typed
settings (PhaseSettings) and show their progress through the caller's Display."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.errors import ConfigError
from edgereason.heads.backbone import feature_tokens
from edgereason.search.dataset import Problem
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings
from edgereason.training import features as feats
from edgereason.training.mc import collect_mc
from edgereason.training.rollouts import collect, rollout_lines
from edgereason.util.terminal import shown_path


@dataclass(frozen=True)
class PhaseSettings:
    """What the phases read beyond their files: the CLI's flags, checked."""

    concurrency: int  # problems in flight at once
    mc_problems: int  # problems whose step prefixes get Monte-Carlo values (0: none)
    mc_completions: int  # completions per prefix
    seed: int
    threads: int | None  # llama.cpp's, and torch's in the train phase (None: physical cores)
    gpu_layers: int
    kv_tokens: int
    layers: tuple[int, ...] | None  # the middle layers a head reads (None: the final layer's)


@dataclass(frozen=True)
class Display:
    """How the phases show themselves on the terminal (the CLI's cli/progress.py)."""

    bar: Callable[[str], Callable[[int, int], None]]  # a phase's progress bar, by its label
    end_line: Callable[[], object]  # ends an open progress bar's line
    pull_progress: Callable[[str, int, int], None]  # a model's download
    say: Callable[[str], None]  # a line on stderr
    redraw: Callable[[str], None]  # the training's status line, in place


def generate(
    settings: ModelSettings,
    phase: PhaseSettings,
    phases: list[str],
    work: Path,
    rollout_file: Path,
    config: SearchConfig,
    problems: list[Problem],
    show: Display,
) -> None:
    """The rollouts and mc phases, on one session of the generator and the rollouts' PRM."""
    session = open_session(settings, progress=show.pull_progress)
    try:
        if "rollouts" in phases:
            engine = session.engine(Policy())
            bar = show.bar("rollouts")
            added = collect(engine, problems, rollout_file, config, phase.concurrency, bar)
            show.end_line()
            show.say(f"rollouts: {added} problems added to {shown_path(rollout_file)}")
        if "mc" in phases and phase.mc_problems:
            rows = list(rollout_lines(rollout_file))
            added = collect_mc(
                session.engine(Policy()),
                rows,
                work / "mc.jsonl",
                phase.mc_problems,
                phase.mc_completions,
                config,
                phase.concurrency,
                phase.seed,
                show.bar("mc prefixes"),
            )
            show.end_line()
            show.say(f"mc: {added} prefixes added to {shown_path(work / 'mc.jsonl')}")
    finally:
        session.close()


def extract_features(
    phase: PhaseSettings,
    backbone: str,
    rollouts: list[dict],
    mc_rows: list[dict],
    out: Path,
    show: Display,
) -> None:
    """The features phase: the backbone's features of every rollout step, written to out."""
    # llama.cpp's verifier is the one that reads a backbone's layers (its LayerCapture); the
    # backends' interface has no feature reader, so this phase names the backend it runs on
    # (pyproject.toml's core contract lists these imports as its exceptions)
    from edgereason.backends.llamacpp import LlamaVerifier, load_model
    from edgereason.backends.llamacpp.layer_capture import LayerCapture
    from edgereason.backends.prm_format import prm_format

    path = models.resolve(backbone, progress=show.pull_progress, role="backbone")
    model = load_model(str(path), phase.gpu_layers)
    capture = None
    try:
        if phase.layers:
            capture = LayerCapture(model.n_embd, model.n_layer, sorted(phase.layers))
    except ValueError as e:  # LayerCapture knows which layers a head may read
        model.close()
        layers = " ".join(map(str, phase.layers or ()))
        has = f"{path.name} has {model.n_layer} layers"
        raise ConfigError(f"--layers {layers}: {has}; {e}") from None
    head = prm_format("head")
    verifier = LlamaVerifier(model, head, phase.kv_tokens, n_threads=phase.threads, capture=capture)
    controls = model.eog_ids | model.control_ids
    tokens = feature_tokens(model.n_vocab, model.n_embd, controls, phase.seed)
    try:
        f = feats.extract(verifier, tokens, rollouts, mc_rows, progress=show.bar("features"))
    finally:
        verifier.close()
    show.end_line()
    if not f:
        raise ConfigError("the rollouts hold no steps to extract features from")
    feats.save(out, f)
    show.say(f"features: {len(f['x'])} steps of {len(rollouts)} problems -> {shown_path(out)}")
