"""The split optimiser on synthetic curves: answers that follow from the workload model by hand."""

from __future__ import annotations

import pytest

from edgereason.errors import ConfigError
from edgereason.memory.curve import Curve
from edgereason.memory.split import Workload, plan_split, predict

GEN = Curve(((1, 10.0), (16, 160.0)))  # decode scales with concurrent sequences
FLAT_GEN = Curve(((1, 50.0), (16, 50.0)))  # decode gains nothing from concurrency
EARLY_PRM = Curve(((64, 800.0), (1024, 800.0)))  # prefill saturates at the smallest batch
LATE_PRM = Curve(((64, 50.0), (1024, 800.0)))  # prefill keeps gaining up to 1,024 tokens
# A sample search's measurements: the most KV cells each model held (prompt 200, PRM head 120, 4
# steps of 64)
MEASURED = Workload(beams=8, generator_peak_tokens=900, verifier_peak_tokens=1000)


def test_curve_interpolates_clamps_and_saturates():
    curve = Curve(((64, 100.0), (128, 300.0), (256, 380.0), (512, 400.0)))
    assert curve.at(96) == pytest.approx(200.0)
    assert curve.at(8) == 100.0 and curve.at(4096) == 400.0
    assert curve.saturation(0.9) == 256  # 380 >= 360; 300 is not


def test_generator_without_batching_gain_gives_the_prm_room_for_its_working_set():
    """The even split leaves the PRM 900 of its 1,000 tokens; the generator runs as fast with fewer,
    so the choice gives the PRM its working set and a 25% larger one, and it scores each step's new
    segments alone."""
    plan = plan_split(1800, 1, 1, FLAT_GEN, EARLY_PRM, MEASURED)
    best = plan.best
    assert (
        best.generator_share < 0.5
        and best.verifier_kv_tokens >= 1.25 * MEASURED.verifier_peak_tokens
    )
    assert best.held_paths == MEASURED.parents
    assert best.verifier_call_tokens == MEASURED.beams * MEASURED.verify_tokens
    assert best.step_time_s < plan.even.step_time_s


def test_tight_budget_hedges_against_a_larger_working_set():
    """At 2,000 tokens the even split holds the PRM's measured 1,000 exactly: a working set 25%
    larger would make it thrash. The choice is the split whose worst case over the range is best."""
    plan = plan_split(2000, 1, 1, GEN, LATE_PRM, MEASURED)
    assert plan.best is not plan.even
    assert plan.best.worst_step_time_s < 0.8 * plan.even.worst_step_time_s
    assert plan.best.worst_step_time_s == min(r.worst_step_time_s for r in plan.rows if r.feasible)


def test_ample_budget_ties_resolve_to_even():
    plan = plan_split(10**6, 1, 1, GEN, EARLY_PRM, MEASURED)
    assert plan.best is plan.even and plan.speedup_vs_even == 1.0


def test_unmeasured_workload_is_refused():
    with pytest.raises(ValueError, match="sample search"):
        plan_split(10**6, 1, 1, GEN, EARLY_PRM, Workload())


DECODE = Curve(((1, 10.0), (4, 40.0)))
FLAT_100 = Curve(((1, 100.0), (1000, 100.0)))


def test_model_by_hand():
    # one step: the prompt and 4 new steps of 64 tokens; the PRM's head and 4 segments of 76 tokens
    w = Workload(
        beams=4,
        width=2,
        steps=1,
        step_tokens=64,
        prompt_tokens=200,
        head_tokens=120,
        generator_peak_tokens=200 + 4 * 64,
        verifier_peak_tokens=120 + 4 * 76,
    )
    p = predict(0.5, 200 + 2 * 64, 120 + 4 * 76, DECODE, FLAT_100, w)
    # beside the prompt: 2 waves of 2 sequences at 20 tok/s, 256 tokens in 12.8 s
    assert p.concurrent_seqs == 2
    assert p.gen_time_s == pytest.approx(4 * 64 / 20)
    # head + the 4 new segments held
    assert p.held_paths == 2 and p.verifier_call_tokens == pytest.approx(304)
    assert p.prm_time_s == pytest.approx(304 / 100)


def test_prm_short_of_its_working_set_rebuilds_in_proportion_to_the_shortfall():
    # 4 sequences, steps of 64 tokens (76 as PRM segments), the PRM's head 120 tokens, a working set
    # of 576
    w = Workload(
        beams=4,
        width=2,
        steps=2,
        step_tokens=64,
        prompt_tokens=200,
        head_tokens=120,
        generator_peak_tokens=584,
        verifier_peak_tokens=576,
    )
    held = 4 * 76  # holding its working set, a step evaluates the 4 new segments
    every_path = 4 * (120 + 2 * 76)  # rebuilding every path, of the mean depth, each step
    for tokens in (500, 272):  # 272: one path of the last step, the least that runs
        short = (576 - tokens) / 576
        p = predict(0.5, 1000, tokens, DECODE, FLAT_100, w)
        assert p.held_paths == 0
        total = held + short * (every_path - held)
        # in calls of at most its KV
        assert p.verifier_call_tokens == pytest.approx(min(tokens, total))
        assert p.prm_time_s == pytest.approx(total / 100)
        # the generator has room for every sequence
        assert p.gen_time_s == pytest.approx(4 * 64 / 40)
    assert predict(0.5, 1000, 576, DECODE, FLAT_100, w).prm_time_s == pytest.approx(held / 100)
    assert predict(0.5, 1000, 271, DECODE, FLAT_100, w).feasible is False


def test_splits_stay_within_budget_with_different_token_sizes():
    budget = 64 << 20
    plan = plan_split(budget, 23040, 12288, GEN, LATE_PRM, MEASURED)
    for row in plan.rows:
        assert row.generator_kv_tokens * 23040 + row.verifier_kv_tokens * 12288 <= budget


def test_no_feasible_split_is_a_config_error():
    with pytest.raises(ConfigError, match="raise --kv-budget"):
        plan_split(600, 1, 1, GEN, LATE_PRM, MEASURED)
