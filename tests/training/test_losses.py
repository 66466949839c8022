"""The within-problem ranking loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgereason.training.losses import rank_loss
from edgereason.training.rows import step_groups


def test_rank_loss_is_the_mean_logistic_loss_of_right_over_wrong_pairs():
    z = torch.tensor([2.0, 0.0, 1.0, -1.0, 3.0], requires_grad=True)
    y = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    problem = np.array([0, 0, 0, 0, 1])
    step = np.array([0, 0, 1, 2, 0])
    last = np.array([False, False, True, True, True])
    weight = torch.ones(5)
    groups = step_groups({"problem": problem, "step": step})
    loss = rank_loss(z, y, groups, problem, last, weight)
    # pairs: (0, 1) share step 0 of problem 0; (2, 3) are both final steps of problem 0; row 4 is
    # another problem
    want = (np.log1p(np.exp(0.0 - 2.0)) + np.log1p(np.exp(-1.0 - 1.0))) / 2
    assert loss.item() == pytest.approx(want, rel=1e-6)
    loss.backward()
    assert z.grad[0] < 0 < z.grad[1] and z.grad[4] == 0
    none = rank_loss(z, np.zeros(5), groups, problem, last, weight)
    assert none.item() == 0.0
