"""AUC and calibration of verifier scores, against scipy's Mann-Whitney U."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from edgereason.training.metrics import auc, calibration


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
