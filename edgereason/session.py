"""Opening the two models and an engine from user settings: the one place CLI, chat UI and bench share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.backends import load_backend
from edgereason.engine import Engine, Listener
from edgereason.errors import ConfigError
from edgereason.policy import Policy

DEFAULT_KV_TOKENS = 16384  # per model; about 370 MB for SmolLM2, 200 MB for Qwen2.5-0.5B


@dataclass(frozen=True)
class ModelSettings:
    model: str = models.DEFAULT_MODEL
    prm: str | None = None  # None: the generator's own weights judge
    prm_format: str = "judge"
    threads: int | None = None
    generator_kv_tokens: int = DEFAULT_KV_TOKENS
    verifier_kv_tokens: int = DEFAULT_KV_TOKENS
    seed: int = 0
    n_gpu_layers: int = 0

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads <= 0:
            raise ConfigError(f"--threads must be positive, got {self.threads}")
        if self.generator_kv_tokens < 256 or self.verifier_kv_tokens < 256:
            raise ConfigError("each model needs at least 256 KV tokens; raise --kv-budget")


@dataclass
class Session:
    settings: ModelSettings
    generator: object
    verifier: object
    generator_path: Path
    prm_path: Path

    def engine(self, policy: Policy, on_event: Listener | None = None, lv_threshold: int = 512) -> Engine:
        return Engine(self.generator, self.verifier, policy, on_event=on_event, lv_threshold=lv_threshold,
                      seed=self.settings.seed)

    def close(self) -> None:
        for model in (self.generator, self.verifier):
            close = getattr(model, "close", None)
            if close:
                close()


def open_session(settings: ModelSettings, backend: str = "llamacpp", progress=None) -> Session:
    gen_path = models.resolve(settings.model, progress=progress)
    prm_path = models.resolve(settings.prm, progress=progress) if settings.prm else gen_path
    open_models = load_backend(backend)
    generator, verifier = open_models(gen_path, prm_path, settings.prm_format, settings.generator_kv_tokens,
                                      settings.verifier_kv_tokens, n_threads=settings.threads,
                                      n_gpu_layers=settings.n_gpu_layers)
    return Session(settings, generator, verifier, gen_path, prm_path)
