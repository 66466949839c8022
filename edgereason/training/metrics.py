"""Ranking and calibration measures of a verifier's scores (numpy only)."""

from __future__ import annotations

import numpy as np


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (Mann-Whitney U with tied ranks
    averaged); NaN when one class is missing. Rows with a NaN score are left out."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels) > 0.5
    keep = ~np.isnan(s)
    s, y = s[keep], y[keep]
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    # average ranks over ties: equal scores must not count as ordered
    _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def calibration(
    scores: np.ndarray, labels: np.ndarray, bins: int = 10
) -> list[tuple[float, float, int]]:
    """(mean score, fraction positive, count) per equal-width score bin that has rows."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    which = np.minimum((s * bins).astype(int), bins - 1)
    return [
        (float(s[which == b].mean()), float(y[which == b].mean()), int((which == b).sum()))
        for b in range(bins)
        if (which == b).any()
    ]


def within_auc(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> float:
    """AUC over the pairs of one right and one wrong row *of the same group* (e.g. the steps of one
    problem at one depth): how well the scores rank the candidates a search actually compares. A
    pooled AUC also rewards telling easy problems from hard ones, which no selection among one
    problem's candidates can use. NaN without a mixed group."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels) > 0.5
    g = np.asarray(groups)
    keep = ~np.isnan(s)
    s, y, g = s[keep], y[keep], g[keep]
    won = pairs = 0.0
    order = np.argsort(g, kind="stable")
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    for idx in np.split(order, bounds):
        n_pos = int(y[idx].sum())
        n_neg = len(idx) - n_pos
        if n_pos and n_neg:
            won += auc(s[idx], y[idx]) * n_pos * n_neg
            pairs += n_pos * n_neg
    return won / pairs if pairs else float("nan")
