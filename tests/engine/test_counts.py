"""Counts, the engine's parts' counters, and the request metrics they are added to."""

from __future__ import annotations

from dataclasses import fields

from edgereason.config import SearchConfig
from edgereason.engine.counts import Counts, record_one
from edgereason.engine.request import Request
from edgereason.engine.result import Counters, RequestMetrics


def test_counts_and_metrics_share_one_declaration_of_the_counters():
    assert issubclass(Counts, Counters) and issubclass(RequestMetrics, Counters)
    counted = tuple(f.name for f in fields(Counters))
    # items() reads the instance's dict: the counters, nothing else
    assert fields(Counts) == fields(Counters) and tuple(vars(Counts())) == counted
    assert set(counted) < {f.name for f in fields(RequestMetrics)}


def test_a_request_metrics_gets_what_was_counted():
    req = Request("r", "q", SearchConfig(), [1])
    record_one(req, Counts(generated_tokens=5, prm_time_s=0.25, evictions=1))
    record_one(req, Counts(generated_tokens=2))
    m = req.metrics
    assert (m.generated_tokens, m.prm_time_s, m.evictions, m.prm_calls) == (7, 0.25, 1, 0)


def test_counts_add_up_and_name_only_what_moved():
    counts = Counts(evictions=1)
    counts += Counts(evictions=2, prm_time_s=0.5)
    assert dict(counts.items()) == {"evictions": 3, "prm_time_s": 0.5}
    assert list(Counts().items()) == []
