"""The speeds real runs measured ($EDGEREASON_HOME/backend-speed.json): kept by device and models,
workload and backend, the last few of each; a damaged file counts as missing, said in one note."""

from __future__ import annotations

import json

import pytest

from edgereason.session.backend_rule import Run
from edgereason.session.speed_log import KEEP, SPEED_FILE, read_runs, record_run

KEY = "gpu-nvidia-h100/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-head"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    return tmp_path


def test_runs_are_kept_by_key_workload_and_backend():
    record_run(KEY, "solve", "torch", Run(4.1234, 9.4, 2010))
    record_run(KEY, "solve", "llamacpp", Run(2.0, 6.2, 1990))
    record_run(KEY, "many-at-once", "torch", Run(9.0, 100.0, 335_600))
    record_run("cpu-x/other/other-judge", "solve", "llamacpp", Run(1.0, 50.0, 300))
    assert read_runs(KEY, "solve") == {
        "torch": [Run(4.123, 9.4, 2010)],
        "llamacpp": [Run(2.0, 6.2, 1990)],
    }
    assert read_runs(KEY, "many-at-once") == {"torch": [Run(9.0, 100.0, 335_600)]}
    assert read_runs(KEY, "one-at-a-time") == {} and read_runs("gpu-y/a/b", "solve") == {}


def test_the_last_runs_of_a_backend_are_kept():
    for i in range(KEEP + 2):
        record_run(KEY, "solve", "torch", Run(float(i), 1.0, 100))
    assert [r.startup_s for r in read_runs(KEY, "solve")["torch"]] == [2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        b"\xff\xfe{}",
        "[]",
        json.dumps({KEY: []}),
        json.dumps({KEY: {"solve": {"torch": {}}}}),
        json.dumps({KEY: {"solve": {"torch": [{"startup_s": 1.0, "search_s": 2.0}]}}}),
        json.dumps({KEY: {"solve": {"torch": [{"startup_s": 1, "search_s": 2, "tokens": True}]}}}),
        json.dumps(
            {
                KEY: {
                    "solve": {
                        "torch": [{"startup_s": -1, "search_s": 2, "tokens": 5, "created": "today"}]
                    }
                }
            }
        ),
        '{"k": {"solve": {"torch": [{"startup_s": 1, "search_s": NaN, "tokens": 5, '
        '"created": "x"}]}}}',
        json.dumps({KEY: {"solve": {"torch": [{"startup_s": 1, "search_s": 2, "tokens": 2.5}]}}}),
    ],
    ids=[
        "not-json",
        "not-utf8",
        "a-list",
        "runs-not-by-workload",
        "runs-not-a-list",
        "no-tokens",
        "tokens-a-bool",
        "negative-start-up",
        "nan",
        "fractional-tokens",
    ],
)
def test_a_damaged_file_counts_as_missing_in_one_note(home, capsys, text):
    path = home / SPEED_FILE
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert read_runs(KEY, "solve") == {}
    assert read_runs(KEY, "many-at-once") == {}  # said once a process
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"edgereason: note: {path} is damaged (")  # then its first wrong field
    assert line.endswith(
        "); --backend auto counts it as missing, and the next run that finishes writes it anew"
    )
    record_run(KEY, "solve", "torch", Run(1.0, 2.0, 5))  # written anew
    assert read_runs(KEY, "solve") == {"torch": [Run(1.0, 2.0, 5)]}


def test_a_home_that_cannot_be_written_costs_a_note(home, capsys, monkeypatch):
    """A file where $EDGEREASON_HOME's folder should be: nothing to read, nothing written."""
    (home / "a-file").write_text("")
    monkeypatch.setenv("EDGEREASON_HOME", str(home / "a-file" / "home"))
    record_run(KEY, "solve", "torch", Run(1.0, 2.0, 5))
    (line,) = capsys.readouterr().err.splitlines()
    path = home / "a-file" / "home" / SPEED_FILE
    assert line.startswith(f"edgereason: could not record this run's speed in {path} (")
    assert read_runs(KEY, "solve") == {}
