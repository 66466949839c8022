"""The head's training loop: what it learns with the ranking loss on, what it records, what it
refuses."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.errors import ConfigError
from edgereason.heads.value_head import Backbone
from edgereason.training.metrics import within_auc
from edgereason.training.rows import step_groups
from edgereason.training.train import TrainConfig, train_head


def _features(
    seed: int = 0, problems: int = 60, paths: int = 6, steps: int = 3
) -> dict[str, np.ndarray]:
    """Rows whose first feature tells right from wrong paths within a problem (plus noise)."""
    rng = np.random.default_rng(seed)
    problem = np.repeat(np.arange(problems), paths * steps)
    path = np.tile(np.repeat(np.arange(paths), steps), problems)
    step = np.tile(np.arange(steps), problems * paths)
    right = (rng.random(problems * paths) < 0.5)[problem * paths + path]
    x = rng.normal(size=(len(problem), 4)).astype(np.float16)
    x[:, 0] += 1.5 * right
    n = len(problem)
    return {
        "tokens": np.arange(4, dtype=np.int32),
        "layers": np.zeros(0, np.int32),
        "x": x,
        "problem": problem.astype(np.int32),
        "path": path.astype(np.int32),
        "step": step.astype(np.int32),
        "last": step == steps - 1,
        "outcome": right.astype(np.float32),
        "mc": np.full(n, np.nan, np.float32),
        "prm": rng.random(n).astype(np.float32),
        "weight": np.ones(n, np.float32),
    }


def test_training_with_the_ranking_loss_on_still_learns_the_signal_and_records_within_aucs():
    f = _features()
    cfg = TrainConfig(hidden=0, epochs=30, batch=64, rank_weight=1.0)
    head, record = train_head(f, Backbone("t", "t.gguf", "0" * 64), cfg)
    assert record["val_within_step_auc"] > 0.75 and record["judge_val_within_step_auc"] < 0.65
    scores = head.logits(f["x"].astype(np.float32))
    assert within_auc(scores, f["outcome"], step_groups(f)) == pytest.approx(
        record["val_within_step_auc"], abs=0.1
    )
    assert record["config"]["rank_weight"] == 1.0


@pytest.mark.parametrize("weight", [-1, float("nan"), float("inf")])
def test_a_negative_or_not_finite_rank_weight_is_refused(weight):
    """NaN passed the check: a head of NaN scores was written, exit 0."""
    with pytest.raises(ConfigError, match="rank-weight"):
        TrainConfig(rank_weight=weight)


def test_one_problem_is_refused_not_made_into_a_head_of_nan():
    """Its steps were all held out for validation: the head was fitted to no rows and wrote NaN,
    exit 0."""
    with pytest.raises(ConfigError, match="at least 2 problems"):
        train_head(
            _features(problems=1),
            Backbone("t", "t.gguf", "0" * 64),
            TrainConfig(hidden=0, epochs=2),
        )
