"""The training rows of a value head: their targets, the validation problems held out whole, the
step groups a search compares, and batches of whole problems."""

from __future__ import annotations

import numpy as np


def split_by_problem(problem: np.ndarray, val_fraction: float, seed: int) -> np.ndarray:
    """A boolean mask of validation rows: whole problems, so no problem is seen on both sides."""
    ids = np.unique(problem)
    rng = np.random.default_rng(seed)
    n_val = max(1, int(round(len(ids) * val_fraction)))
    return np.isin(problem, rng.permutation(ids)[:n_val])


def targets(f: dict[str, np.ndarray]) -> np.ndarray:
    return np.where(np.isnan(f["mc"]), f["outcome"], f["mc"]).astype(np.float32)


def step_groups(f: dict[str, np.ndarray]) -> np.ndarray:
    """[n] int64: one id per (problem, step index): the candidates one selection of a search
    compares."""
    return f["problem"].astype(np.int64) * (int(f["step"].max()) + 1) + f["step"]


def problem_batches(
    problem: np.ndarray, rows: np.ndarray, batch: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """`rows` in shuffled batches of whole problems, about `batch` rows each."""
    order = rows[np.argsort(problem[rows], kind="stable")]
    chunks = np.split(order, np.flatnonzero(np.diff(problem[order])) + 1)
    per = max(1, round(batch * len(chunks) / max(len(rows), 1)))
    perm = rng.permutation(len(chunks))
    return [
        np.concatenate([chunks[k] for k in perm[lo : lo + per]])
        for lo in range(0, len(chunks), per)
    ]
