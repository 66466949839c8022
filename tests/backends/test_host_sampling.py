"""Sampling: p draws from one distribution follow its law independently; rows drawn together are
drawn as alone."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare, kstest

from edgereason.backends.host_sampling import (
    CUTOFF,
    by_id,
    draw_rows,
    sample,
    sample_rows,
    uniforms,
)
from edgereason.config import SamplingParams, mix_seed
from edgereason.errors import ModelError


def test_p_draws_follow_the_distribution():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], dtype=np.float32))
    draws = []
    for seed in range(4000):  # 4000 nodes of potential 4: 16000 draws
        draws += sample(logits, 4, SamplingParams(temperature=1.0, seed=seed))
    counts = np.bincount(draws, minlength=5)
    expected = np.array([0.5, 0.2, 0.15, 0.1, 0.05]) * len(draws)
    assert chisquare(counts, expected).pvalue > 0.01


def test_draws_within_a_node_are_independent():
    """Pairs drawn together must be as often equal as independent pairs: sum p_i^2."""
    logits = np.log(np.array([0.6, 0.4], dtype=np.float32))
    pairs = [sample(logits, 2, SamplingParams(temperature=1.0, seed=s)) for s in range(6000)]
    same = sum(a == b for a, b in pairs) / len(pairs)
    assert abs(same - (0.36 + 0.16)) < 0.03


def test_uniforms_are_the_tree_hash_and_uniform():
    seeds = np.array([0, 1, 2**62 + 5, mix_seed(7)], dtype=np.uint64)
    counters = np.array([0, 3, 1, 9])
    want = [(mix_seed(int(s), int(c)) >> 10) / 2**53 for s, c in zip(seeds, counters)]
    assert uniforms(seeds, counters).tolist() == want
    u = uniforms(np.full(20000, 12345), np.arange(20000))
    assert kstest(u, "uniform").pvalue > 0.01 and u.min() >= 0.0 and u.max() < 1.0
    logits = np.zeros(50, dtype=np.float32)  # a seed is any int: its low 64 bits choose the stream
    assert sample(logits, 8, SamplingParams(temperature=1.0, seed=2**64 + 3)) == sample(
        logits, 8, SamplingParams(temperature=1.0, seed=3)
    )
    assert len(sample(logits, 8, SamplingParams(temperature=1.0, seed=-1))) == 8


def test_greedy_and_top_p():
    logits = np.array([0.0, 3.0, 1.0], dtype=np.float32)
    assert sample(logits, 3, SamplingParams(temperature=0.0)) == [1, 1, 1]
    assert set(sample(logits, 200, SamplingParams(temperature=1.0, top_p=0.5))) == {1}
    assert len(set(sample(logits, 200, SamplingParams(temperature=1.0)))) == 3


def test_rows_drawn_together_are_drawn_as_alone():
    """A pass's device rows are drawn in one call: settings differ, rows come in no order, each
    keeps its own stream, and a row's draws are those of the whole row with every token outside its
    top k left out."""
    rng = np.random.default_rng(3)
    k = 12
    full = [rng.normal(scale=1.0, size=50).astype(np.float32) for _ in range(5)]
    params = [
        SamplingParams(temperature=0.8, seed=1),
        SamplingParams(temperature=0.0, top_p=0.9, seed=2),
        SamplingParams(temperature=1.3, top_p=0.7, seed=3),
        SamplingParams(temperature=0.5, seed=4),
        SamplingParams(temperature=1.0, top_p=0.95, seed=5),
    ]
    n = [6, 2, 9, 1, 4]
    # [5, k] as a device returns them
    top = np.stack([rng.permutation(np.argsort(-row)[:k]) for row in full])
    together = sample_rows(
        *by_id(top, np.stack([row[ids] for row, ids in zip(full, top)])), n, params
    )
    masked = [
        np.where(np.isin(np.arange(50), ids), row, -np.inf).astype(np.float32)
        for row, ids in zip(full, top)
    ]
    alone = [sample(row, c, p) for row, c, p in zip(masked, n, params)]
    assert together == alone
    assert [len(d) for d in together] == n and together[1] == [int(np.argmax(full[1]))] * 2
    assert len(set(together[0])) > 1  # several draws of one row are independent, not one repeated


def test_only_tokens_past_the_cutoff_are_left_out():
    t = 0.8
    ids = np.array([[0, 1, 2]], dtype=np.int32)
    logits = np.array([[5.0, 5.0 - (CUTOFF - 1) * t, 5.0 - (CUTOFF + 1) * t]], dtype=np.float32)
    top = np.full(2, np.nextafter(1.0, 0.0))  # the largest uniforms: the last kept token
    # token 1 (e^-29 of token 0's probability) can still be drawn; token 2 (under e^-30) cannot
    assert draw_rows(ids, logits, [2], [SamplingParams(temperature=t)], top) == [[1, 1]]
    assert draw_rows(ids, logits, [1], [SamplingParams(temperature=t, top_p=0.999)], top[:1]) == [
        [0]
    ]
    assert draw_rows(ids, logits, [1], [SamplingParams(temperature=t)], np.zeros(1)) == [[0]]


def test_logits_that_are_not_numbers_are_a_damaged_model() -> None:
    """Damaged weights give NaN logits: a whole row at temperature > 0 had no candidate, and the
    draw was `ValueError: attempt to get argmax of an empty sequence` (a traceback, exit 1)."""
    nan_row = np.full(20, np.nan, dtype=np.float32)
    for temperature in (0.0, 0.8):
        with pytest.raises(ModelError, match="weights are damaged"):
            sample(nan_row, 2, SamplingParams(temperature=temperature))
    ids = np.array([[0, 1, 2], [0, 1, 2]], dtype=np.int32)
    logits = np.array([[1.0, 2.0, 3.0], [1.0, np.nan, 3.0]], dtype=np.float32)
    with pytest.raises(ModelError, match="weights are damaged"):  # device rows: one damaged row
        sample_rows(ids, logits, [1, 1], [SamplingParams(), SamplingParams()])
    with pytest.raises(ModelError):  # rows with no candidate at all
        sample_rows(ids[:, :0], logits[:, :0], [1, 1], [SamplingParams(), SamplingParams()])
    row = np.array([-np.inf, 2.0, -np.inf], dtype=np.float32)  # tokens left out are no damage
    assert sample(row, 2, SamplingParams(temperature=0.8)) == [1, 1]
