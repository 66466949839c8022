"""Rollout files: a problem's paths from several files (independent samples, then a search's finals)
are merged."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from edgereason.config import SearchConfig
from edgereason.errors import ConfigError
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
