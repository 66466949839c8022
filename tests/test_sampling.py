"""Deduplicated sampling draws p tokens from one distribution: the same law as p independent samples."""

from __future__ import annotations

import numpy as np
from scipy.stats import chisquare

from edgereason.config import SamplingParams
from edgereason.sampling import sample


def test_p_draws_follow_the_distribution():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], dtype=np.float32))
    rng = np.random.default_rng(7)
    draws = []
    for _ in range(4000):  # 4000 nodes of potential 4: 16000 draws
        draws += sample(logits, 4, SamplingParams(temperature=1.0), rng)
    counts = np.bincount(draws, minlength=5)
    expected = np.array([0.5, 0.2, 0.15, 0.1, 0.05]) * len(draws)
    assert chisquare(counts, expected).pvalue > 0.01


def test_draws_within_a_node_are_independent():
    """Pairs drawn together must be as often equal as independent pairs: sum p_i^2."""
    logits = np.log(np.array([0.6, 0.4], dtype=np.float32))
    rng = np.random.default_rng(11)
    pairs = [sample(logits, 2, SamplingParams(temperature=1.0), rng) for _ in range(6000)]
    same = sum(a == b for a, b in pairs) / len(pairs)
    assert abs(same - (0.36 + 0.16)) < 0.03


def test_greedy_and_top_p():
    logits = np.array([0.0, 3.0, 1.0], dtype=np.float32)
    rng = np.random.default_rng(0)
    assert sample(logits, 3, SamplingParams(temperature=0.0), rng) == [1, 1, 1]
    draws = sample(logits, 200, SamplingParams(temperature=1.0, top_p=0.5), rng)
    assert set(draws) == {1}


class _TopOfRange:
    """An rng whose uniform draws are the largest below 1: they land on the last token of the cumulative sum."""

    def random(self, n: int) -> np.ndarray:
        return np.full(n, np.nextafter(1.0, 0.0))


def test_only_tokens_past_the_cutoff_are_left_out():
    from edgereason.sampling import CUTOFF

    t = 0.8
    logits = np.array([5.0, 5.0 - (CUTOFF - 1) * t, 5.0 - (CUTOFF + 1) * t], dtype=np.float32)
    # token 1 (e^-29 of token 0's probability) can still be drawn; token 2 (under e^-30) cannot
    assert sample(logits, 2, SamplingParams(temperature=t), _TopOfRange()) == [1, 1]
    assert sample(logits, 1, SamplingParams(temperature=t, top_p=0.999), _TopOfRange()) == [0]
