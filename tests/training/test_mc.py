"""Which rollout prefixes get Monte-Carlo values."""

from __future__ import annotations

from edgereason.training.mc import mc_jobs


def row(pid: str, *paths: tuple[bool, int]) -> dict:
    return {
        "id": pid,
        "problem": "p",
        "gold": "1",
        "paths": [{"correct": ok, "steps": [f"s{k}" for k in range(n)]} for ok, n in paths],
    }


def test_one_correct_and_one_wrong_path_of_several_steps_each_with_every_proper_prefix() -> None:
    rollouts = [row("a", (False, 1), (False, 1), (False, 3), (True, 1), (True, 2), (False, 1))]
    for seed in range(20):
        jobs = mc_jobs(rollouts, problems=1, seed=seed)
        # the 3-step wrong path (prefixes of 1 and 2 steps) and the 2-step correct one (a prefix of
        # 1), whatever the seed: the one-step paths have no proper prefix to value
        assert sorted((pi, k) for _, pi, k in jobs) == [(2, 1), (2, 2), (4, 1)]
        assert {job.prefix for job, _, _ in jobs} == {"s0", "s0s1"}


def test_one_step_paths_give_no_prefix_and_problems_caps_the_subset() -> None:
    assert mc_jobs([row("a", (True, 1), (False, 1))], problems=5, seed=0) == []
    rollouts = [row("a", (True, 2)), row("b", (False, 2)), row("c", (True, 3)), row("d")]
    for seed in range(10):
        assert len({job.problem.id for job, _, _ in mc_jobs(rollouts, problems=2, seed=seed)}) == 2
    assert {job.problem.id for job, _, _ in mc_jobs(rollouts, problems=9, seed=0)} == {
        "a",
        "b",
        "c",
    }


def test_a_problem_of_one_step_paths_takes_no_place_in_the_subset() -> None:
    rollouts = [row("x", (True, 1), (False, 1)), row("y", (False, 2))]
    for seed in range(10):
        assert [
            (job.problem.id, pi, k) for job, pi, k in mc_jobs(rollouts, problems=1, seed=seed)
        ] == [("y", 0, 1)]
