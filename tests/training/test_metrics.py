"""AUC and calibration of verifier scores, against scipy's Mann-Whitney U."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from edgereason.training.metrics import auc, calibration, within_auc


def test_auc_matches_mann_whitney_with_ties():
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(300), 1)  # many ties
    labels = rng.random(300) < scores
    u = mannwhitneyu(scores[labels], scores[~labels]).statistic
    assert auc(scores, labels) == pytest.approx(u / (labels.sum() * (~labels).sum()))


def test_auc_edges():
    assert auc(np.array([0.1, 0.9]), np.array([0, 1])) == 1.0
    assert auc(np.array([0.9, 0.1]), np.array([0, 1])) == 0.0
    assert auc(np.array([0.5, 0.5]), np.array([0, 1])) == 0.5
    assert math.isnan(auc(np.array([0.2, 0.3]), np.array([1, 1])))
    assert auc(np.array([0.1, np.nan, 0.9]), np.array([0, 1, 1])) == 1.0  # NaN scores are left out


def test_calibration_bins():
    bins = calibration(np.array([0.05, 0.05, 0.95, 0.95]), np.array([0, 0, 1, 0]))
    assert bins == [(0.05, 0.0, 2), (0.95, 0.5, 2)]


def test_within_auc_counts_only_pairs_of_one_group():
    # group 0: right 0.9 vs wrong 0.1 (won); group 1: right 0.2 vs wrong 0.3 and 0.1 (one of two
    # won); group 2 has one class only. Pooled, the right 0.2 loses to the wrong 0.3 as well.
    scores = np.array([0.9, 0.1, 0.2, 0.3, 0.1, 0.8])
    labels = np.array([1, 0, 1, 0, 0, 1])
    groups = np.array([0, 0, 1, 1, 1, 2])
    assert within_auc(scores, labels, groups) == pytest.approx((1 + 1) / 3)
    assert within_auc(scores, labels, groups[::-1].copy()) != pytest.approx(auc(scores, labels))


def test_within_auc_removes_what_only_tells_problems_apart():
    # a score that is each problem's difficulty ranks pooled steps well and one problem's candidates
    # not at all
    rng = np.random.default_rng(1)
    problem = np.repeat(np.arange(200), 8)
    ease = rng.random(200)[problem]
    labels = rng.random(len(problem)) < ease
    assert auc(ease, labels) > 0.7
    assert within_auc(ease, labels, problem) == pytest.approx(0.5)
    assert math.isnan(within_auc(ease, np.ones_like(labels), problem))
