"""Rollout files: a problem's paths from several files (independent samples, then a search's finals)
are merged; a damaged line is one error naming the file and the line (issue 62, item 3)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from damaged_files import LINE

from edgereason.config import SearchConfig
from edgereason.errors import ConfigError, DamagedFileError
from edgereason.training.rollouts import merge_rollouts, rollout_config


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(pid: str, *paths: list[str], search: str | None = None) -> dict:
    row = {
        "id": pid,
        "problem": f"problem {pid}",
        "gold": "1",
        "paths": [
            {
                "steps": steps,
                "answer": "1",
                "correct": True,
                "prm": [0.5] * len(steps),
                "potential": 1,
            }
            for steps in paths
        ],
    }
    return row if search is None else {**row, "search": search}


def test_a_problem_in_two_files_gets_both_files_paths_once_each_with_its_search(tmp_path: Path):
    samples = _write(
        tmp_path / "samples.jsonl",
        [_row("a", ["s1"], ["s2"]), _row("b", ["t1"]), _row("a", ["ignored"])],
    )  # a second line of one file: first counts
    beam = _write(
        tmp_path / "beam.jsonl",
        [_row("a", ["s2"], ["s3", "s4"], search="beam"), _row("c", ["u"], search="beam")],
    )
    rows = {r["id"]: r for r in merge_rollouts([samples, beam])}
    assert sorted(rows) == ["a", "b", "c"]
    # s2 once, the first file's
    assert [p["steps"] for p in rows["a"]["paths"]] == [["s1"], ["s2"], ["s3", "s4"]]
    assert [p.get("search") for p in rows["a"]["paths"]] == [None, None, "beam"]
    assert rows["c"]["search"] == "beam" and rows["b"]["paths"][0]["steps"] == ["t1"]


def test_the_rollout_search_takes_samples_as_its_size_and_an_impossible_beam_is_refused():
    base = SearchConfig(strategy="best-of-n", beams=4, width=4)
    assert (rollout_config(base, 6).beams, rollout_config(base, 6).width) == (6, 1)
    beam = rollout_config(SearchConfig(strategy="beam", beams=4, width=4), 8)
    assert (beam.strategy, beam.beams, beam.width) == ("beam", 8, 4)
    with pytest.raises(ConfigError):
        rollout_config(SearchConfig(strategy="beam", beams=4, width=4), 6)


def test_a_committed_gz_rollout_file_merges_as_its_plain_lines(tmp_path: Path):
    """The committed rollouts are .jsonl.gz: read as plain text they gave no rows, and train-prm
    said to run the rollouts phase."""
    plain = _write(tmp_path / "samples.jsonl", [_row("a", ["s1"], ["s2"]), _row("b", ["t1"])])
    packed = tmp_path / "samples.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert (
        merge_rollouts([packed]) == merge_rollouts([plain]) and len(merge_rollouts([packed])) == 2
    )


def _path_edited(**change) -> bytes:
    row = _row("b", ["s1", "s2"])
    row["paths"][0].update(change)
    return json.dumps(row).encode()


@pytest.mark.parametrize(
    "line, message",
    [
        *LINE.values(),
        (json.dumps({**_row("b", ["s"]), "id": ["b"]}).encode(), "id must be a string, not a list"),
        (
            json.dumps({**_row("b", ["s"]), "paths": None}).encode(),
            "paths must be a list, not null",
        ),
        (json.dumps({**_row("b", ["s"]), "gold": 1}).encode(), "gold must be a string, not 1"),
        (_path_edited(steps=5), "paths[0].steps must be a list, not 5"),
        (_path_edited(correct="yes"), 'paths[0].correct must be true or false, not "yes"'),
        (_path_edited(prm=[0.5, float("nan")]), "paths[0].prm[1] must be a number >= 0 and <= 1"),
        (_path_edited(prm=[0.5, float("inf")]), "paths[0].prm[1] must be a number >= 0 and <= 1"),
        (_path_edited(potential=0), "paths[0].potential must be a whole number >= 1, not 0"),
    ],
    ids=[
        *LINE,
        "id list",
        "paths null",
        "gold number",
        "steps number",
        "correct string",
        "prm NaN",
        "prm Infinity",
        "potential 0",
    ],  # fmt: skip
)
def test_a_damaged_rollout_line_names_the_file_and_the_line(tmp_path: Path, line, message):
    """Each of these was a TypeError in train-prm (unhashable id, steps without len, paths None) or
    a RecursionError, or went into the features silently (NaN scores, a list line skipped)."""
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(json.dumps(_row("a", ["s1"])).encode() + b"\n" + line + b"\n")
    with pytest.raises(DamagedFileError) as e:
        merge_rollouts([path])
    assert str(e.value).startswith(f"{path}: line 2: {message}")
    assert "remove that line, or give another rollouts file" in str(e.value)


def test_prm_scores_that_are_not_one_a_step_are_refused(tmp_path: Path):
    path = _write(tmp_path / "rollouts.jsonl", [_row("a", ["s1"])])
    path.write_bytes(path.read_bytes() + _path_edited(prm=[0.5]) + b"\n")
    with pytest.raises(DamagedFileError, match="problem 'b': paths\\[0\\] has 2 steps and 1 PRM"):
        merge_rollouts([path])


def test_a_line_cut_by_a_crash_is_skipped(tmp_path: Path):
    path = _write(tmp_path / "rollouts.jsonl", [_row("a", ["s1"])])
    path.write_bytes(path.read_bytes() + json.dumps(_row("b", ["s1"])).encode()[:30])
    assert [r["id"] for r in merge_rollouts([path])] == ["a"]
