"""Feature sets of several rollout shards merge into one whose problems stay distinct (the split is
by problem)."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.training import features as feats


def _part(problems: list[int], tokens: list[int]) -> dict[str, np.ndarray]:
    n = len(problems)
    return {
        "tokens": np.asarray(tokens, np.int32),
        "layers": np.zeros(0, np.int32),
        "x": np.arange(n * 2, dtype=np.float16).reshape(n, 2),
        "problem": np.asarray(problems, np.int32),
        "path": np.zeros(n, np.int32),
        "step": np.arange(n, dtype=np.int32),
        "last": np.ones(n, bool),
        "outcome": np.ones(n, np.float32),
        "mc": np.full(n, np.nan, np.float32),
        "prm": np.full(n, 0.5, np.float32),
        "weight": np.ones(n, np.float32),
    }


def test_merge_shifts_problem_indices_past_earlier_parts():
    merged = feats.merge([_part([0, 0, 1], [5, 7]), _part([0, 2], [5, 7])])
    assert merged["problem"].tolist() == [0, 0, 1, 2, 4]
    assert merged["x"].shape == (5, 2) and merged["step"].tolist() == [0, 1, 2, 0, 1]
    assert set(merged) == set(feats.FIELDS)


def test_merge_refuses_sets_read_on_other_tokens():
    with pytest.raises(ValueError, match="different token sets"):
        feats.merge([_part([0], [5, 7]), _part([0], [5, 8])])


def _with_layers(layers: list[int], k: int = 2, width: int = 3) -> dict[str, np.ndarray]:
    part = _part([0, 1], list(range(k)))
    cols = k + width * len(layers)
    return {
        **part,
        "layers": np.asarray(layers, np.int32),
        "x": np.arange(2 * cols, dtype=np.float32).reshape(2, cols),
    }


def test_select_keeps_the_logits_or_the_named_layers_columns():
    f = _with_layers([4, 9])  # columns: logits 0-1, layer 4 at 2-4, layer 9 at 5-7
    logits = feats.select(f, ())
    assert logits["x"].tolist() == [[0, 1], [8, 9]] and logits["layers"].tolist() == []
    nine = feats.select(f, (9,))
    assert nine["x"].tolist() == [[5, 6, 7], [13, 14, 15]] and nine["tokens"].tolist() == []
    both = feats.select(f, (9, 4))
    assert both["layers"].tolist() == [9, 4] and both["x"][0].tolist() == [5, 6, 7, 2, 3, 4]
    with pytest.raises(
        ValueError,
        match="hold layers \\[4, 9\\], not \\[5\\]; run the features phase with --layers 5",
    ):
        feats.select(f, (5,))


def test_merge_refuses_sets_read_at_other_layers_and_old_files_read_as_logits_only(tmp_path):
    with pytest.raises(ValueError, match="different layers"):
        feats.merge([_with_layers([4]), _with_layers([5])])
    old = {k: v for k, v in _part([0, 1], [5, 7]).items() if k != "layers"}
    np.savez(tmp_path / "old.npz", **old)
    assert feats.load(tmp_path / "old.npz")["layers"].tolist() == []
