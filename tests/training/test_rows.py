"""The training rows: batches of whole problems."""

from __future__ import annotations

import numpy as np

from edgereason.training.rows import problem_batches


def test_problem_batches_cover_the_rows_once_in_whole_problems():
    problem = np.repeat(np.arange(30), np.arange(1, 31) % 7 + 1)
    rows = np.flatnonzero(problem % 5 != 0)  # a training subset
    batches = problem_batches(problem, rows, 20, np.random.default_rng(0))
    assert sorted(np.concatenate(batches).tolist()) == rows.tolist()
    owners = [set(problem[b].tolist()) for b in batches]
    # no problem split over batches
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1 :])
    assert 1 < len(batches) < len(np.unique(problem[rows]))
