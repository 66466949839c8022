"""Frozen, validated settings shared by the CLI, the engine and the bench."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Literal

from edgereason.errors import ConfigError

StrategyName = Literal["beam", "best-of-n", "dvts"]
Aggregation = Literal["last", "min", "prod", "mean"]
Vote = Literal["best", "weighted", "majority"]
Select = Literal["top", "diverse"]

STRATEGY_NAMES: tuple[str, ...] = ("beam", "best-of-n", "dvts")
AGGREGATIONS: tuple[str, ...] = ("last", "min", "prod", "mean")
VOTES: tuple[str, ...] = ("best", "weighted", "majority")
SELECTS: tuple[str, ...] = ("top", "diverse")

# a reasoning step ends where its text first holds this (design.md section 3)
STEP_END = b"\n\n"


def mix_seed(*parts: int) -> int:
    """splitmix64 over the parts: a child's seed from its parent's seed and its place among the
    children."""
    x = 0x9E3779B97F4A7C15
    for part in parts:
        x = (x ^ (part & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x >> 1


def physical_cores() -> int:
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:  # psutil is a dependency; this only guards odd installs
        return os.cpu_count() or 1


def check_threads(threads: int | None) -> None:
    """--threads, for every command that runs a model: None is the physical cores."""
    if threads is not None and threads <= 0:
        raise ConfigError(f"--threads must be positive, got {threads}")
    cpus = os.cpu_count() or 1
    # spinning threads past the CPUs only wait on each other
    if threads is not None and threads > cpus:
        raise ConfigError(
            f"--threads {threads} is more than this machine's {cpus} CPUs; use at most {cpus}"
        )


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are drawn; temperature 0 means greedy."""

    temperature: float = 0.8
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ConfigError(
                f"--temperature must be a finite number >= 0 (0 = greedy), got {self.temperature}"
            )
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p must be in (0, 1], got {self.top_p}")

    def with_seed(self, seed: int) -> SamplingParams:
        """These settings with another seed: a draw's own stream (the engine makes one a row a pass;
        the checks again cost about a microsecond)."""
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, seed=seed)


@dataclass(frozen=True)
class SearchConfig:
    """What is searched (design.md section 3). `keep` = beams / width candidates survive each
    selection."""

    strategy: StrategyName = "beam"
    beams: int = 4
    width: int = 4
    max_steps: int = 40
    max_step_tokens: int = 2048
    max_path_tokens: int = 4096
    aggregation: Aggregation = "last"
    vote: Vote = "best"
    select: Select = "top"
    sampling: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGY_NAMES:
            raise ConfigError(
                f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGY_NAMES)}"
            )
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"unknown aggregation {self.aggregation!r}; choose one of {', '.join(AGGREGATIONS)}"
            )
        if self.vote not in VOTES:
            raise ConfigError(f"unknown vote {self.vote!r}; choose one of {', '.join(VOTES)}")
        if self.select not in SELECTS:
            raise ConfigError(
                f"unknown selection rule {self.select!r}; choose one of {', '.join(SELECTS)}"
            )
        for name, flag in (
            ("beams", "--beams"),
            ("width", "--width"),
            ("max_steps", "--max-steps"),
            ("max_step_tokens", "--max-step-tokens"),
            ("max_path_tokens", "--max-tokens"),
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{flag} must be a positive number, got {getattr(self, name)}")
        if self.grows_tree and self.beams % self.width:
            raise ConfigError(
                f"--beams {self.beams} is not divisible by --width {self.width}: each selection "
                "keeps beams/width candidates, so pick e.g. --beams "
                f"{self.width * max(1, self.beams // self.width)}, or --strategy best-of-n for any "
                "number of samples"
            )

    @property
    def keep(self) -> int:
        return self.beams // self.width

    @property
    def grows_tree(self) -> bool:
        """Beam and DVTS select among each step's candidates, so `width` and `select` shape them;
        best-of-n reads neither."""
        return self.strategy != "best-of-n"

    def with_(self, **changes) -> SearchConfig:
        return replace(self, **changes)
