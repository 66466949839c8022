"""Bench results that survive (issue 55, item 4): saved after each problem, each file replaced
whole; --out locked while a bench writes it; --resume continues an interrupted bench; a refused
bench leaves nothing behind; a full disk loses at most the problems in flight and the table is
still printed. The fake backend runs the bench's own code in-process; SmolLM2 runs the kill and the
full disk in a child process."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import FakeGenerator, FakeVerifier

from edgereason.cli import bench
from edgereason.cli.main import build_parser, main
from edgereason.evaluation import session_runs
from edgereason.evaluation.out_folder import OutFolder
from edgereason.evaluation.resume import merge_runs
from edgereason.session.opening import Session
from edgereason.session.settings import ModelSettings

SMALL = [
    "--policies",
    "baseline",
    "--concurrency",
    "1",
    "--no-plots",
    "--beams",
    "2",
    "--width",
    "2",
]
SMALL += ["--max-steps", "1", "--max-step-tokens", "4", "--threads", "1", "--kv-tokens", "1024"]


def dataset(tmp_path: Path, n: int = 4, long_ids_from: int | None = None) -> Path:
    """n problems; from `long_ids_from` on, ids of 20,000 characters (records that fill a file)."""
    rows = []
    for i in range(n):
        pid = f"p{i}" + ("x" * 20_000 if long_ids_from is not None and i >= long_ids_from else "")
        rows.append(json.dumps({"id": pid, "problem": f"What is {i} + 1?", "answer": str(i + 1)}))
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def fake_bench(monkeypatch, generator: FakeGenerator | None = None) -> None:
    """Bench's sessions on the fake backend."""

    def session(settings: ModelSettings, progress: object = None) -> Session:
        return Session(
            settings, generator or FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm")
        )

    monkeypatch.setattr(session_runs, "open_session", session)


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


class StopsAfter(FakeGenerator):
    """Ctrl-C (as the signal raises it) at the `steps`-th forward pass."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.left = steps

    def step(self, *args, **kwargs):
        self.left -= 1
        if self.left < 0:
            raise KeyboardInterrupt
        return super().step(*args, **kwargs)


def test_results_are_saved_after_each_problem(tmp_path, monkeypatch) -> None:
    """They were written after each run only: a kill lost every finished problem of the run."""
    fake_bench(monkeypatch)
    saved: list[int] = []
    real_save = OutFolder.save

    def save(folder: OutFolder, config: dict, runs: list[dict]) -> bool:
        saved.append(sum(run["problems"] for run in runs))
        return real_save(folder, config, runs)

    monkeypatch.setattr(OutFolder, "save", save)
    assert (
        main(["bench", "--dataset", str(dataset(tmp_path)), "--out", str(tmp_path / "out"), *SMALL])
        == 0
    )
    assert saved[:4] == [1, 2, 3, 4] and saved[-1] == 4
    assert not results(tmp_path / "out")["runs"][0]["interrupted"]


def test_an_interrupted_bench_resumes_from_its_finished_problems(
    tmp_path, monkeypatch, capsys
) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    fake_bench(monkeypatch, StopsAfter(12))
    assert main(["bench", "--dataset", str(data), "--out", str(out), *SMALL]) == 130
    (cut,) = results(out)["runs"]
    assert cut["interrupted"] and 1 <= cut["problems"] < 4
    fake_bench(monkeypatch)
    assert main(["bench", "--dataset", str(data), "--out", str(out), *SMALL, "--resume"]) == 0
    (run,) = results(out)["runs"]
    assert [p["id"] for p in run["per_problem"]] == ["p0", "p1", "p2", "p3"]
    assert run["problems"] == 4 and not run["interrupted"] and run["resumed"]
    assert run["wall_s"] >= cut["wall_s"] and len(results(out)["config"]["resumed"]) == 1
    capsys.readouterr()
    assert main(["bench", "--dataset", str(data), "--out", str(out), *SMALL, "--resume"]) == 0
    assert "nothing is left to run" in capsys.readouterr().err


def test_resume_refuses_other_settings_and_a_folder_without_results(
    tmp_path, monkeypatch, capsys
) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    fake_bench(monkeypatch, StopsAfter(6))
    main(["bench", "--dataset", str(data), "--out", str(out), *SMALL])
    capsys.readouterr()
    assert (
        main(
            ["bench", "--dataset", str(data), "--out", str(out), *SMALL, "--resume", "--seed", "7"]
        )
        == 2
    )
    assert (
        f"--resume: the bench in {out} ran with seed 0, this command has 7"
        in capsys.readouterr().err
    )
    assert (
        main(["bench", "--dataset", str(data), "--out", str(tmp_path / "none"), *SMALL, "--resume"])
        == 2
    )
    assert "holds no results.json to continue" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_a_second_bench_on_a_locked_out_is_refused_before_any_work(tmp_path, capsys) -> None:
    """Both benches exited 0 and said where their results were; only the second's runs were kept."""
    out = tmp_path / "out"
    with OutFolder(out) as first:
        first.save({"first": True}, [])
        absent = ["--model", str(tmp_path / "absent.gguf")]
        code = main(
            ["bench", "--dataset", str(dataset(tmp_path)), "--out", str(out), "--force", *absent]
        )
        err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"--out {out} is being written by another bench; wait for it to end" in err
    assert results(out)["config"] == {"first": True}


def test_a_refused_bench_leaves_nothing_behind(tmp_path, monkeypatch, capsys) -> None:
    """A bench refused after --out was made (a model that is not there, Ctrl-C before a problem
    finished) left an empty folder, or a results.json without runs that then needed --force."""
    out = tmp_path / "new" / "out"
    absent = ["--model", str(tmp_path / "absent.gguf")]
    code = main(["bench", "--dataset", str(dataset(tmp_path)), "--out", str(out), *absent])
    assert code == 1 and not (tmp_path / "new").exists()
    fake_bench(monkeypatch, StopsAfter(1))
    assert main(["bench", "--dataset", str(dataset(tmp_path)), "--out", str(out), *SMALL]) == 130
    assert "no problem had finished; nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_merged_runs_add_their_counts_and_figure_over_all_problems() -> None:
    def part(ids: list[str], wall: float) -> dict:
        record = {
            "correct": True,
            "latency": 2.0,
            "tokens": 10,
            "final_tokens": 5,
            "waiting_ratio": 0.1,
        }
        run = {"policy": "edge", "beams": 2, "rate": "inf", "repeat": 0, "problems": len(ids)}
        run |= {"correct": len(ids), "wall_s": wall, "gen_time_s": 1.0, "prm_time_s": 1.0}
        run |= {"prm_calls": 2, "prm_requests_per_call_mean": 3.0, "prm_tokens": 20}
        run |= {"forward_passes": 4, "rows_per_pass": 2.0, "interrupted": False}
        return run | {"per_problem": [{"id": i, **record} for i in ids]}

    run = merge_runs({**part(["a"], 2.0), "interrupted": True}, part(["b", "c"], 4.0))
    assert [p["id"] for p in run["per_problem"]] == ["a", "b", "c"] and run["problems"] == 3
    assert run["wall_s"] == 6.0 and run["generated_tokens"] == 30 and run["throughput_tok_s"] == 5.0
    assert run["accuracy"] == 1.0 and run["prm_calls"] == 4 and run["prm_batch_tokens_mean"] == 10.0
    assert run["resumed"] and not run["interrupted"] and run["latency_s_mean"] == 2.0


def test_bench_records_server_urls_without_credentials() -> None:
    """results.json's base_url held the password of a --base-url with user:password@."""
    args = build_parser().parse_args(["bench", "--base-url", "http://user:pw@h:1,http://h2:2"])
    config = bench._config(args, [], [], [], [])
    assert config["base_url"] == "http://***@h:1,http://h2:2"


# ------------------------------------------------------------ a real bench, killed or out of disk
def child_bench(data: Path, out: Path, smollm2: Path, *extra: str, limit_bytes: int | None = None):
    def before_exec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # a file past this size cannot grow: writes fail (EFBIG), as on a full disk
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    command = [
        sys.executable,
        "-m",
        "edgereason",
        "bench",
        "--dataset",
        str(data),
        "--out",
        str(out),
    ]
    return subprocess.Popen(
        [*command, "--model", str(smollm2), *SMALL, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=before_exec,
    )


@pytest.mark.slow
def test_a_killed_bench_keeps_its_finished_problems_and_resumes(tmp_path, smollm2_path) -> None:
    data, out = dataset(tmp_path, 3), tmp_path / "out"
    proc = child_bench(data, out, smollm2_path)
    deadline = time.monotonic() + 300
    while not (out / "results.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate()
    (cut,) = results(out)["runs"]
    assert cut["interrupted"] and cut["problems"] >= 1
    done = child_bench(data, out, smollm2_path, "--resume")  # the lock went with the killed process
    stdout, stderr = done.communicate(timeout=600)
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    (run,) = results(out)["runs"]
    assert (
        sorted(p["id"] for p in run["per_problem"]) == ["p0", "p1", "p2"] and not run["interrupted"]
    )
    assert "baseline" in stdout


@pytest.mark.slow
def test_a_full_disk_loses_at_most_the_problems_in_flight_and_the_table_is_printed(
    tmp_path, smollm2_path
) -> None:
    """An OSError traceback after the whole run, and the run's results and table were gone."""
    data, out = dataset(tmp_path, 3, long_ids_from=1), tmp_path / "out"
    # problem 1 fits, the others do not
    proc = child_bench(data, out, smollm2_path, limit_bytes=16_000)
    stdout, stderr = proc.communicate(timeout=600)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    assert sum("cannot write the results to" in line for line in lines) == 1  # said once
    assert lines[-1].startswith(
        f"edgereason: error: the results could not be written to {out} (File too large)"
    )
    assert "holds the 1 problem(s) saved before" in lines[-1]
    assert "baseline" in stdout  # the table, with every problem's figures
    (run,) = results(out)["runs"]
    assert run["problems"] == 1 and [p["id"] for p in run["per_problem"]] == ["p0"]
