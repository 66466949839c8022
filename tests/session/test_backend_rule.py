"""`--backend auto`'s rule with faked measurements: the backend measured faster for the workload
once both were measured, else the prior (llama.cpp one at a time, torch several at once)."""

from __future__ import annotations

import pytest

from edgereason.session.backend_rule import (
    PRIORS,
    Run,
    bench_workload,
    faster_backend,
)
from edgereason.session.settings import WORKLOADS

# an H100's figures (issue 63): a solve from the command to the answer, start-up apart
LLAMA_SOLVE = Run(startup_s=2.0, search_s=6.2, tokens=2000)
TORCH_SOLVE = Run(startup_s=7.0, search_s=6.5, tokens=2000)
# 16 problems at once: 1,552 and 3,356 tok/s
LLAMA_MANY = Run(startup_s=3.0, search_s=100.0, tokens=155_200)
TORCH_MANY = Run(startup_s=9.0, search_s=100.0, tokens=335_600)


def test_the_priors_until_both_are_measured():
    assert {w: PRIORS[w].backend for w in WORKLOADS} == {
        "solve": "llamacpp",
        "one-at-a-time": "llamacpp",
        "many-at-once": "torch",
    }


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize(
    "runs",
    [
        {},
        {"torch": [TORCH_MANY]},
        {"llamacpp": [LLAMA_SOLVE]},
        {"llamacpp": [], "torch": [TORCH_SOLVE]},
    ],
    ids=["none", "torch-only", "llamacpp-only", "llamacpp-empty"],
)
def test_without_both_measured_the_prior_decides_and_says_how_to_measure(runs, workload):
    choice = faster_backend(runs, workload)
    assert choice.backend == PRIORS[workload].backend and choice.seconds == {}
    missing = [b for b in ("llamacpp", "torch") if not runs.get(b)]
    assert list(choice.unmeasured) == missing
    note = choice.note()
    assert note.startswith("edgereason: --backend auto runs on ") and "\n" not in note
    assert PRIORS[workload].evidence in note
    assert all(f"once with --backend {b}" in note for b in missing)
    assert ("run a solve once" if workload == "solve" else "run the bench once") in note


def test_a_solve_measured_both_ways_each_way():
    slow_torch = faster_backend({"llamacpp": [LLAMA_SOLVE], "torch": [TORCH_SOLVE]}, "solve")
    assert slow_torch.backend == "llamacpp"
    assert slow_torch.seconds == pytest.approx({"llamacpp": 8.2, "torch": 13.5})
    note = slow_torch.note()
    assert "llama.cpp for one search a process, measured faster on this device" in note
    assert "llama.cpp 8.2 s, torch 13.5 s" in note and "scaled to 2,000 tokens" in note
    # torch's start-up made as fast as llama.cpp's (issue 63 item 2): its search is faster
    fast_torch = Run(startup_s=1.5, search_s=5.0, tokens=2000)
    choice = faster_backend({"llamacpp": [LLAMA_SOLVE], "torch": [fast_torch]}, "solve")
    assert choice.backend == "torch" and "torch 6.5 s, llama.cpp 8.2 s" in choice.note()


@pytest.mark.parametrize("workload", ["one-at-a-time", "many-at-once"])
def test_a_bench_measured_both_ways_each_way_by_tokens_a_second(workload):
    fast_torch = faster_backend({"llamacpp": [LLAMA_MANY], "torch": [TORCH_MANY]}, workload)
    assert fast_torch.backend == "torch"
    assert "torch 3,356 tok/s, llama.cpp 1,552 tok/s" in fast_torch.note()
    slow_torch = Run(startup_s=0.1, search_s=100.0, tokens=100_000)
    choice = faster_backend({"llamacpp": [LLAMA_MANY], "torch": [slow_torch]}, workload)
    assert choice.backend == "llamacpp"


def test_only_a_solve_counts_its_start_up():
    """A bench's start-up is paid once for all its problems: a slow start does not lose it."""
    llama = Run(startup_s=1.0, search_s=10.0, tokens=1000)
    torch = Run(startup_s=20.0, search_s=8.0, tokens=1000)
    runs = {"llamacpp": [llama], "torch": [torch]}
    assert faster_backend(runs, "solve").backend == "llamacpp"
    assert faster_backend(runs, "many-at-once").backend == "torch"


def test_solves_of_different_sizes_are_scaled_to_the_same_tokens():
    """torch ran a problem of twice the tokens in less than twice the search time: it is faster,
    though its run took longer."""
    llama = Run(startup_s=1.0, search_s=5.0, tokens=1000)
    torch = Run(startup_s=1.0, search_s=8.0, tokens=2000)
    choice = faster_backend({"llamacpp": [llama], "torch": [torch]}, "solve")
    assert choice.tokens == 1500
    assert choice.seconds == pytest.approx({"llamacpp": 8.5, "torch": 7.0})
    assert choice.backend == "torch"


def test_a_backend_is_known_by_its_fastest_run():
    """A cold start (the weights dequantized into their cache) does not count against torch."""
    cold = Run(startup_s=30.0, search_s=6.5, tokens=2000)
    warm = Run(startup_s=1.0, search_s=6.5, tokens=2000)
    runs = {"llamacpp": [LLAMA_SOLVE], "torch": [cold, warm]}
    assert faster_backend(runs, "solve").backend == "torch"
    assert faster_backend({**runs, "torch": [cold]}, "solve").backend == "llamacpp"


@pytest.mark.parametrize("workload", WORKLOADS)
def test_a_tie_keeps_the_prior(workload):
    same = Run(startup_s=1.0, search_s=5.0, tokens=1000)
    choice = faster_backend({"llamacpp": [same], "torch": [same]}, workload)
    assert choice.backend == PRIORS[workload].backend


@pytest.mark.parametrize(
    ("concurrency", "problems", "workload"),
    [
        (1, 50, "one-at-a-time"),
        (0, 1, "one-at-a-time"),  # no limit, one problem
        (0, 50, "many-at-once"),
        (2, 50, "many-at-once"),
        (16, 3, "many-at-once"),
    ],
)
def test_a_bench_is_one_at_a_time_or_many_at_once(concurrency, problems, workload):
    assert bench_workload(concurrency, problems) == workload
