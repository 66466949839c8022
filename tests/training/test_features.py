"""Feature sets of several rollout shards merge into one whose problems stay distinct (the split is by problem)."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.training import features as feats


def _part(problems: list[int], tokens: list[int]) -> dict[str, np.ndarray]:
    n = len(problems)
    return {"tokens": np.asarray(tokens, np.int32), "x": np.arange(n * 2, dtype=np.float16).reshape(n, 2),
            "problem": np.asarray(problems, np.int32), "path": np.zeros(n, np.int32),
            "step": np.arange(n, dtype=np.int32), "last": np.ones(n, bool), "outcome": np.ones(n, np.float32),
            "mc": np.full(n, np.nan, np.float32), "prm": np.full(n, 0.5, np.float32), "weight": np.ones(n, np.float32)}


def test_merge_shifts_problem_indices_past_earlier_parts():
    merged = feats.merge([_part([0, 0, 1], [5, 7]), _part([0, 2], [5, 7])])
    assert merged["problem"].tolist() == [0, 0, 1, 2, 4]
    assert merged["x"].shape == (5, 2) and merged["step"].tolist() == [0, 1, 2, 0, 1]
    assert set(merged) == set(feats.FIELDS)


def test_merge_refuses_sets_read_on_other_tokens():
    with pytest.raises(ValueError, match="different token sets"):
        feats.merge([_part([0], [5, 7]), _part([0], [5, 8])])
