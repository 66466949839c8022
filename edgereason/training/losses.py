"""The value head's training loss: class-balanced cross-entropy, plus a ranking loss over the right
and wrong paths of one problem (train.py's module docstring says why)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from edgereason.training.rows import step_groups

if TYPE_CHECKING:  # torch is the optional [torch] extra: imported where training runs
    import torch


def rank_loss(
    z: torch.Tensor,
    y: np.ndarray,
    group: np.ndarray,
    problem: np.ndarray,
    last: np.ndarray,
    weight: torch.Tensor,
) -> torch.Tensor:
    """Mean logistic loss over (right, wrong) pairs of one batch that share a step group, or a
    problem among final steps; weighted by both paths' potentials. z, weight: float tensors [b]; y,
    group, problem, last: numpy [b]."""
    import torch

    pos, neg = y > 0.5, y <= 0.5
    same = (group[:, None] == group[None, :]) | (
        (problem[:, None] == problem[None, :]) & last[:, None] & last[None, :]
    )
    i, j = np.nonzero(same & pos[:, None] & neg[None, :])
    if not len(i):
        return z.sum() * 0.0
    i, j = torch.from_numpy(i), torch.from_numpy(j)
    w = weight[i] * weight[j]
    return (torch.nn.functional.softplus(z[j] - z[i]) * w).sum() / w.sum()


def batch_loss(
    f: dict[str, np.ndarray], y: np.ndarray, val: np.ndarray, rank_weight: float
) -> Callable[[torch.Tensor, np.ndarray], torch.Tensor]:
    """loss(z, rows): one batch's class-balanced cross-entropy (each class half of the loss, scaled
    by each path's potential), plus the ranking loss at rank_weight. z: the logits of the batch's
    `rows`."""
    import torch

    pos = (y[~val] > 0.5).mean()
    class_weight = torch.from_numpy(
        np.where(y > 0.5, 0.5 / pos, 0.5 / (1 - pos)).astype(np.float32) * f["weight"]
    )
    yt = torch.from_numpy(y)
    groups = step_groups(f)
    path_weight = torch.from_numpy(f["weight"].astype(np.float32))

    def loss(z: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        b = torch.from_numpy(rows)
        value = torch.nn.functional.binary_cross_entropy_with_logits(
            z, yt[b], weight=class_weight[b]
        )
        if rank_weight:
            value = value + rank_weight * rank_loss(
                z, y[rows], groups[rows], f["problem"][rows], f["last"][rows], path_weight[b]
            )
        return value

    return loss
