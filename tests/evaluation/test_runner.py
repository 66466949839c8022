"""The run loop and the report on the fake backend: Poisson arrivals, aggregates, plots, the
table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fakes import FakeGenerator, FakeVerifier

from edgereason.config import SearchConfig
from edgereason.engine.policy import parse_policy
from edgereason.evaluation.plots import write_plots
from edgereason.evaluation.report import print_table, write_results
from edgereason.evaluation.runner import RunSpec, run_one
from edgereason.search.dataset import Problem
from edgereason.session.opening import Session
from edgereason.session.settings import ModelSettings

PROBLEMS = [Problem(f"p{i}", f"question {i}", "1") for i in range(4)]


def _session() -> Session:
    return Session(ModelSettings(), FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm"))


def test_runs_at_two_rates_aggregate_and_plot(tmp_path):
    session = _session()
    config = SearchConfig(beams=4, width=2, max_steps=3, max_step_tokens=8)
    runs = []
    for rate in (20.0, 40.0):
        for policy in ("baseline", "edge"):
            seen = []
            runs.append(
                run_one(
                    session,
                    RunSpec(parse_policy(policy), config, rate, 0, seed=1),
                    PROBLEMS,
                    lambda done, total, seen=seen: seen.append((done, total)),
                )
            )
            assert seen[-1] == (4, 4)
    for run in runs:
        assert run["problems"] == 4 and len(run["per_problem"]) == 4
        assert run["generated_tokens"] > 0 and run["prm_calls"] > 0
        assert run["wall_s"] >= run["gen_time_s"] + run["prm_time_s"] - 1e-6
        assert 0 <= run["waiting_ratio_median"] <= 1
    assert runs[0]["wall_s"] > 3 / 20.0 * 0.5  # arrivals were waited for
    write_results(tmp_path, {"note": "fake"}, runs)
    names = {p.name for p in write_plots(tmp_path, runs)}
    assert {
        "throughput_goodput.png",
        "latency_vs_rate.png",
        "waiting_ratio.png",
        "prm_scores.png",
    } <= names
    table = io.StringIO()
    print_table(runs, table)
    assert len(table.getvalue().splitlines()) == 1 + len(runs)


def test_concurrency_limit_serves_requests_one_at_a_time(monkeypatch):
    from edgereason.engine.loop import Engine

    in_flight = []
    step = Engine.step

    def counting_step(self):
        in_flight.append(sum(r.status == "running" for r in self.requests))
        step(self)

    monkeypatch.setattr(Engine, "step", counting_step)
    config = SearchConfig(beams=4, width=2, max_steps=3, max_step_tokens=8)
    spec = RunSpec(parse_policy("edge"), config, float("inf"), 0, seed=1, concurrency=1)
    run = run_one(_session(), spec, PROBLEMS)
    assert run["problems"] == 4 and run["concurrency"] == 1
    assert max(in_flight) == 1
    unlimited = run_one(
        _session(), RunSpec(parse_policy("edge"), config, float("inf"), 0, seed=1), PROBLEMS
    )
    assert unlimited["concurrency"] == 0 and max(in_flight) == 4
    # one 4-beam search never has more than 4 rows in a pass; four at once fill passes further
    assert 1 < run["rows_per_pass"] <= 4 and run["forward_rows"] == pytest.approx(
        run["rows_per_pass"] * run["forward_passes"]
    )
    assert unlimited["rows_per_pass"] > run["rows_per_pass"]
