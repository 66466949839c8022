"""Request arrival times: all at once, or a Poisson process (exponential gaps) from a seeded
generator."""

from __future__ import annotations

import math

import numpy as np

from edgereason.errors import ConfigError

MIN_RATE = 1 / 86400  # requests/s: one a day; far below it the arrival times overflow time.sleep


def parse_rate(text: str) -> float:
    """`inf` or a positive number of requests per second."""
    try:
        rate = float(text)
    except ValueError:
        raise ConfigError(
            f"--rate takes numbers of requests per second or inf, got {text!r}"
        ) from None
    if not rate > 0 or math.isnan(rate):
        raise ConfigError(f"--rate must be positive (or inf), got {text!r}")
    if rate < MIN_RATE:
        raise ConfigError(
            f"--rate {text} is under one request a day: the bench would wait days between "
            f"problems; give at least {MIN_RATE:.2g} (or inf)"
        )
    return rate


def arrival_times(n: int, rate: float, seed: int) -> np.ndarray:
    """Seconds after the run start at which each of n requests arrives; rate inf submits all at time
    0."""
    if math.isinf(rate):
        return np.zeros(n)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    return np.cumsum(gaps)
