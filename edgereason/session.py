"""Opening the two models and an engine from user settings: the one place CLI, chat UI and bench share.

KV memory: either `--kv-tokens` per model, or one `--kv-budget` for both, split by the memory profile of this
device and model pair (`edgereason memory-profile`) or evenly. The profile also gives the lazy-verification
threshold; without one the engine uses safe defaults and says once how to profile.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.backends import load_backend
from edgereason.engine import Engine, Listener
from edgereason.errors import ConfigError
from edgereason.memory import default_device_id, find_profile, verifier_id
from edgereason.policy import Policy

DEFAULT_KV_TOKENS = 16384  # per model; about 370 MB for SmolLM2, 200 MB for Qwen2.5-0.5B
DEFAULT_LV_THRESHOLD = {"cpu": 512, "gpu": 2048}  # tokens (design.md section 4)
SPLITS = ("profile", "even")

_hinted = False


@dataclass(frozen=True)
class ModelSettings:
    model: str = models.DEFAULT_MODEL
    prm: str | None = None  # None: the generator's own weights judge
    prm_format: str = "judge"
    threads: int | None = None
    generator_kv_tokens: int = DEFAULT_KV_TOKENS
    verifier_kv_tokens: int = DEFAULT_KV_TOKENS
    kv_budget_bytes: int | None = None  # both models together; overrides the per-model token counts
    split: str = "profile"
    n_gpu_layers: int = 0
    flash_attn: bool = True  # off: bit-exact incremental PRM scoring, much slower with many cells in use

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads <= 0:
            raise ConfigError(f"--threads must be positive, got {self.threads}")
        if self.generator_kv_tokens < 256 or self.verifier_kv_tokens < 256:
            raise ConfigError("each model needs at least 256 KV tokens; raise --kv-tokens")
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.kv_budget_bytes is not None and self.kv_budget_bytes <= 0:
            raise ConfigError("--kv-budget must be positive")
        if self.n_gpu_layers < 0:
            raise ConfigError(f"--gpu-layers must be >= 0, got {self.n_gpu_layers}")


@dataclass
class Session:
    settings: ModelSettings
    generator: object
    verifier: object
    generator_path: Path
    prm_path: Path
    lv_threshold: int = DEFAULT_LV_THRESHOLD["cpu"]
    profile: dict | None = None

    def engine(self, policy: Policy, on_event: Listener | None = None) -> Engine:
        return Engine(self.generator, self.verifier, policy, on_event=on_event, lv_threshold=self.lv_threshold)

    def close(self) -> None:
        for model in (self.generator, self.verifier):
            close = getattr(model, "close", None)
            if close:
                close()


def _profile_for(settings: ModelSettings) -> dict | None:
    global _hinted
    prm = settings.prm or settings.model
    device = default_device_id("gpu" if settings.n_gpu_layers else "cpu")
    profile = find_profile(device, models.display_name(settings.model), verifier_id(prm, settings.prm_format))
    if profile is None and not _hinted:
        _hinted = True
        print(f"edgereason: no memory profile for this device and models; using defaults. To tune: edgereason "
              f"memory-profile --generator {settings.model} --prm {prm}", file=sys.stderr)
    return profile


def kv_tokens(settings: ModelSettings, gen_bytes_per_token: int, ver_bytes_per_token: int,
              profile: dict | None) -> tuple[int, int]:
    """Per-model KV tokens: a budget is split by the profile's byte shares (or evenly), else the flags."""
    if settings.kv_budget_bytes is None:
        return settings.generator_kv_tokens, settings.verifier_kv_tokens
    share = 0.5
    if settings.split == "profile" and profile is not None:
        gen_b, ver_b = profile["generator_kv_bytes"], profile["verifier_kv_bytes"]
        share = gen_b / (gen_b + ver_b)
    gen = int(settings.kv_budget_bytes * share) // gen_bytes_per_token
    ver = int(settings.kv_budget_bytes * (1 - share)) // ver_bytes_per_token
    if min(gen, ver) < 256:
        raise ConfigError(f"--kv-budget {settings.kv_budget_bytes / 2**20:.1f} MiB leaves {gen} generator and "
                          f"{ver} PRM KV tokens; each model needs at least 256: raise the budget")
    return gen, ver


def open_session(settings: ModelSettings, backend: str = "llamacpp", progress=None) -> Session:
    gen_path = models.resolve(settings.model, progress=progress)
    prm_path = models.resolve(settings.prm, progress=progress) if settings.prm else gen_path
    runtime = load_backend(backend)
    if settings.n_gpu_layers:
        runtime.require_gpu("drop --gpu-layers")
    profile = _profile_for(settings)
    gen_tokens, ver_tokens = kv_tokens(settings, runtime.kv_bytes_per_token(gen_path, settings.n_gpu_layers),
                                       runtime.kv_bytes_per_token(prm_path, settings.n_gpu_layers), profile)
    generator, verifier = runtime.open_models(gen_path, prm_path, settings.prm_format, gen_tokens, ver_tokens,
                                              n_threads=settings.threads, n_gpu_layers=settings.n_gpu_layers,
                                              flash_attn=settings.flash_attn)
    lv = int(profile["lv_threshold_tokens"]) if profile else DEFAULT_LV_THRESHOLD[
        "gpu" if settings.n_gpu_layers else "cpu"]
    return Session(settings, generator, verifier, gen_path, prm_path, lv_threshold=lv, profile=profile)
