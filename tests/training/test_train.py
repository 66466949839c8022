"""The head's training loop: batches of whole problems, the within-problem ranking loss, and what it records."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgereason.errors import ConfigError
from edgereason.heads.value_head import Backbone
from edgereason.training.metrics import within_auc
from edgereason.training.train import TrainConfig, problem_batches, rank_loss, step_groups, train_head


def test_problem_batches_cover_the_rows_once_in_whole_problems():
    problem = np.repeat(np.arange(30), np.arange(1, 31) % 7 + 1)
    rows = np.flatnonzero(problem % 5 != 0)  # a training subset
    batches = problem_batches(problem, rows, 20, np.random.default_rng(0))
    assert sorted(np.concatenate(batches).tolist()) == rows.tolist()
    owners = [set(problem[b].tolist()) for b in batches]
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1 :])  # no problem split over batches
    assert 1 < len(batches) < len(np.unique(problem[rows]))


def test_rank_loss_is_the_mean_logistic_loss_of_right_over_wrong_pairs():
    z = torch.tensor([2.0, 0.0, 1.0, -1.0, 3.0], requires_grad=True)
    y = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    problem = np.array([0, 0, 0, 0, 1])
    step = np.array([0, 0, 1, 2, 0])
    last = np.array([False, False, True, True, True])
    weight = torch.ones(5)
    groups = step_groups({"problem": problem, "step": step})
    loss = rank_loss(z, y, groups, problem, last, weight)
    # pairs: (0, 1) share step 0 of problem 0; (2, 3) are both final steps of problem 0; row 4 is another problem
    want = (np.log1p(np.exp(0.0 - 2.0)) + np.log1p(np.exp(-1.0 - 1.0))) / 2
    assert loss.item() == pytest.approx(want, rel=1e-6)
    loss.backward()
    assert z.grad[0] < 0 < z.grad[1] and z.grad[4] == 0
    none = rank_loss(z, np.zeros(5), groups, problem, last, weight)
    assert none.item() == 0.0


def _features(seed: int = 0, problems: int = 60, paths: int = 6, steps: int = 3) -> dict[str, np.ndarray]:
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
    assert within_auc(scores, f["outcome"], step_groups(f)) == pytest.approx(record["val_within_step_auc"], abs=0.1)
    assert record["config"]["rank_weight"] == 1.0


@pytest.mark.parametrize("weight", [-1, float("nan"), float("inf")])
def test_a_negative_or_not_finite_rank_weight_is_refused(weight):
    """NaN passed the check: a head of NaN scores was written, exit 0."""
    with pytest.raises(ConfigError, match="rank-weight"):
        TrainConfig(rank_weight=weight)


def test_one_problem_is_refused_not_made_into_a_head_of_nan():
    """Its steps were all held out for validation: the head was fitted to no rows and wrote NaN, exit 0."""
    with pytest.raises(ConfigError, match="at least 2 problems"):
        train_head(_features(problems=1), Backbone("t", "t.gguf", "0" * 64), TrainConfig(hidden=0, epochs=2))
