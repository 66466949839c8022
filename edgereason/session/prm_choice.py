"""Which PRM a session runs: its weights, its format and, for the `head` format, the trained value
head.

Rules:
- `--prm` absent or `self`: the generator's own weights (one copy of the weights in memory).
- `--prm-format auto` (the default): `head` when a value head is given (`--prm-head`) or one ships
  for the PRM model, else `judge`. Shipped heads (edgereason/heads/, made by `edgereason
  train-prm`): `<prm>--<generator>` was trained on that generator's paths and is taken when that
  generator runs; `<prm>` on the PRM model's own paths.
- `head` needs a head whose backbone is the PRM model (checked by sha256 when the model opens).
  `--prm-head` takes a file or the name of a shipped head: `qwen2.5-coder-1.5b-lora` is the 1.5B's
  fine-tuned verifier (a LoRA adapter beside a head; opt-in: it scores in a context of its own, an
  extra pass over every step).
- `--prm hf:PATH` runs the PRM on torch + transformers (a Hugging Face folder, or a .gguf read into
  torch); `qwen-prm` and `skywork` need it (their reward heads are not in a GGUF).
- Served (`--backend remote`, `--prm-base-url`): `auto` is `judge`; a server runs no value head (one
  runs here beside served generators) and no hf: model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.backends import RemoteSettings
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead, head_paths, load_head
from edgereason.session.settings import SELF, ModelSettings

PRM_FORMAT_CHOICES = ("auto", "judge", "rlhflow", "head", "math-shepherd", "qwen-prm", "skywork")
# a reward head on the hidden states, which a GGUF conversion drops
HEAD_ONLY_FORMATS = ("qwen-prm", "skywork")
HEADS_DIR = Path(__file__).resolve().parent.parent / "heads"
PullProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class PRMChoice:
    name: str  # registry name or path, as the user named the PRM's weights
    format: str  # a concrete format: judge, rlhflow or head
    head: ValueHead | None


def shipped_head(prm: str, generator: str) -> Path | None:
    """The value head that ships for a registry PRM model judging `generator`, if any: one trained
    on that generator's paths first (a head reads what separates right from wrong paths of the model
    that wrote them)."""
    if prm not in models.REGISTRY:
        return None
    for path in (HEADS_DIR / f"{prm}--{generator}.safetensors", HEADS_DIR / f"{prm}.safetensors"):
        if path.is_file():
            return path
    return None


def head_path(given: str) -> Path:
    """--prm-head: a file, or the name of a head that ships (`qwen2.5-coder-1.5b-lora`:
    edgereason/heads/)."""
    path = Path(given).expanduser()
    shipped = HEADS_DIR / f"{given}.safetensors"
    local = any(p.exists() for p in (path, *head_paths(path)))
    return shipped if not local and "/" not in given and shipped.is_file() else path


def choose_prm(model: str, prm: str | None, prm_format: str, prm_head: str | None) -> PRMChoice:
    if prm_format not in PRM_FORMAT_CHOICES:
        raise ConfigError(
            f"unknown PRM format {prm_format!r}; choose one of {', '.join(PRM_FORMAT_CHOICES)}"
        )
    name = model if prm in (None, SELF) else prm
    head_file = head_path(prm_head) if prm_head else shipped_head(name, model)
    fmt = ("head" if head_file else "judge") if prm_format == "auto" else prm_format
    if fmt in HEAD_ONLY_FORMATS and not name.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--prm-format {fmt} reads the checkpoint's reward head, which llama.cpp cannot run: "
            f'pass --prm {models.HF_PREFIX}FOLDER (pip install "edgereason[torch]")'
        )
    if fmt != "head":
        if prm_head:
            raise ConfigError(
                f"--prm-head is read by --prm-format head, not {fmt}; drop one of them"
            )
        return PRMChoice(name, fmt, None)
    if head_file is None:
        raise ConfigError(
            f"--prm-format head needs a trained value head and none ships for {name}: pass "
            "--prm-head FILE (make one with edgereason train-prm)"
        )
    return PRMChoice(name, fmt, load_head(head_file))


def prm_for(settings: ModelSettings) -> PRMChoice:
    """The PRM a session of `settings` runs: choose_prm, after a served setup's rules."""
    remote = settings.remote
    fmt = settings.prm_format if remote is None else _served_format(settings, remote)
    choice = choose_prm(settings.model, settings.prm, fmt, settings.prm_head)
    if remote is not None and choice.name.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--prm {choice.name} runs on torch in this process; a served PRM is named by its "
            "GGUF (its tokenizer and chat template) and --prm-base-url"
        )
    return choice


def _served_format(settings: ModelSettings, remote: RemoteSettings) -> str:
    """The PRM format a served setup runs, checked: a server runs no value head and no hf: model."""
    if settings.model.startswith(models.HF_PREFIX):
        raise ConfigError(
            f"--model {settings.model} runs on the torch backend, which a served setup does not "
            "use; name the generator by its GGUF"
        )
    if settings.prm_format == "head" and not remote.prm_here:
        raise ConfigError(
            "--prm-format head cannot be served: a value head reads thousands of logits per step "
            "and a server returns 20; drop --prm-base-url to run it here, or use judge, rlhflow or "
            "math-shepherd"
        )
    return "judge" if settings.prm_format == "auto" else settings.prm_format
