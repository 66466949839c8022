"""Arrival times: the part of a bench that needs no model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgereason.errors import ConfigError
from edgereason.evaluation.arrivals import arrival_times, parse_rate


def test_poisson_mean_gap_matches_rate():
    times = arrival_times(2000, 5.0, seed=7)
    gaps = np.diff(np.concatenate([[0.0], times]))
    assert abs(gaps.mean() - 0.2) < 0.2 * 0.05
    assert np.all(gaps > 0)
    assert np.array_equal(times, arrival_times(2000, 5.0, seed=7))


def test_infinite_rate_arrives_at_once():
    assert not arrival_times(5, math.inf, seed=0).any()
    assert math.isinf(parse_rate("inf"))
    # 1e-300: an OverflowError traceback in time.sleep
    for bad in ("0", "-1", "fast", "nan", "1e-300"):
        with pytest.raises(ConfigError):
            parse_rate(bad)
