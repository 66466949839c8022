"""Which rollout prefixes get Monte-Carlo values, and the file of those values read back: a damaged
line is one error naming the file and the line (issue 62, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from damaged_files import LINE

from edgereason.errors import DamagedFileError
from edgereason.training.mc import mc_jobs, mc_lines

GOOD = {"id": "a", "path": 0, "steps": 1, "value": 0.5, "completions": 4}


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


@pytest.mark.parametrize(
    "line, message",
    [
        *LINE.values(),
        (
            json.dumps({**GOOD, "value": "x"}).encode(),
            'value must be a number >= 0 and <= 1, not "x"',
        ),
        (json.dumps({**GOOD, "path": None}).encode(), "path must be a whole number >= 0, not null"),
        (json.dumps({**GOOD, "value": float("nan")}).encode(), "value must be a number >= 0"),
        (json.dumps({**GOOD, "steps": 0}).encode(), "steps must be a whole number >= 1, not 0"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "id"}).encode(), "id is missing"),
    ],
    ids=[*LINE, "string value", "null path", "NaN", "no steps", "no id"],
)
def test_a_damaged_value_line_names_the_file_and_the_line(tmp_path: Path, line, message):
    """A value of "x" or a path of null crashed train-prm's features phase (ValueError, TypeError);
    NaN went into the training labels."""
    path = tmp_path / "mc.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + line + b"\n")
    with pytest.raises(DamagedFileError) as e:
        mc_lines(path)
    assert str(e.value).startswith(f"{path}: line 2: {message}")


def test_values_read_back_and_a_line_cut_by_a_crash_is_skipped(tmp_path: Path):
    path = tmp_path / "mc.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + json.dumps(GOOD).encode()[:20])
    assert mc_lines(path) == [GOOD] and mc_lines(tmp_path / "none.jsonl") == []
