"""Sampling on the device: the host sampler's rule and streams (backends/host_sampling.py), whatever
the batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgereason.backends import host_sampling as host
from edgereason.backends.torch.device_draws import draw_rows, uniforms
from edgereason.config import SamplingParams

SEEDS = [0, 1, 7, 2**31 + 5, 2**63 - 1, 2**63, 2**64 - 1, -3, 12345678901234567890]


def test_uniforms_equal_the_host_stream():
    seeds = [s & (2**64 - 1) for s in SEEDS]
    counters = list(range(len(seeds)))
    signed = [s - 2**64 if s >= 2**63 else s for s in seeds]
    got = uniforms(torch.tensor(signed), torch.tensor(counters)).numpy()
    np.testing.assert_array_equal(
        got, host.uniforms(np.array(seeds, dtype=np.uint64), np.array(counters))
    )


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.8, seed=3),
        SamplingParams(temperature=1.3, top_p=0.9, seed=11),
        SamplingParams(temperature=0.5, top_p=0.5, seed=2**63 + 9),
        SamplingParams(temperature=0.0, seed=4),
    ],
)
def test_draws_equal_the_host_sampler_on_the_same_row(params):
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((3, 500)) * 3).astype(np.float32)
    logits[1, 17] = logits[1, 250] = logits[1].max() + 1  # a tie for the best: the lowest id wins
    n = [5, 1, 3]
    got = draw_rows(torch.from_numpy(logits), n, [params] * 3)
    want = [host.sample(row, k, params) for row, k in zip(logits, n)]
    assert got == want


def test_a_rows_draws_do_not_depend_on_the_rest_of_the_batch():
    rng = np.random.default_rng(1)
    row = torch.from_numpy((rng.standard_normal((1, 300)) * 2).astype(np.float32))
    mine = SamplingParams(temperature=1.0, top_p=0.95, seed=42)
    alone = draw_rows(row, [6], [mine])[0]
    others = torch.from_numpy((rng.standard_normal((4, 300)) * 2).astype(np.float32))
    mixed = [
        SamplingParams(temperature=0.7, seed=1),
        SamplingParams(temperature=0.0),
        mine,
        SamplingParams(temperature=1.5, top_p=0.5, seed=9),
        SamplingParams(seed=2),
    ]
    batch = torch.cat([others[:2], row, others[2:]])
    assert draw_rows(batch, [2, 1, 6, 3, 4], mixed)[2] == alone
    # a real stream: six draws at temperature 1 over 300 tokens are not all one token
    assert len(set(alone)) > 1
