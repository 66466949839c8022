"""Counts, the engine's parts' counters, and the request metrics they are added to."""

from __future__ import annotations

from dataclasses import fields

from edgereason.engine.counts import Counts
from edgereason.engine.result import RequestMetrics


def test_each_counter_is_a_metric_of_the_same_type_and_zero():
    metrics = {f.name: f for f in fields(RequestMetrics)}
    for f in fields(Counts):
        assert f.name in metrics, f.name
        assert (f.type, f.default) == (metrics[f.name].type, metrics[f.name].default), f.name


def test_counts_add_up_and_name_only_what_moved():
    counts = Counts(evictions=1)
    counts += Counts(evictions=2, prm_time_s=0.5)
    assert dict(counts.items()) == {"evictions": 3, "prm_time_s": 0.5}
    assert list(Counts().items()) == []
