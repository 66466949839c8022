"""A tiny real bench through the CLI: SmolLM2 on two GSM8K problems, files and fields checked."""

from __future__ import annotations

import csv
import json

import pytest

from edgereason.cli.main import main
from edgereason.session.speed_log import SPEED_FILE


@pytest.mark.slow
def test_bench_smollm2_two_problems(tmp_path, capsys, gsm8k_path):
    out = tmp_path / "bench"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "2",
            "--policies",
            "edge",
            "--beams",
            "2",
            "--width",
            "2",
            "--max-steps",
            "2",
            "--max-step-tokens",
            "32",
            "--kv-tokens",
            "4096",
            "--model",
            "smollm2-135m",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    (run,) = results["runs"]
    assert run["policy"] == "edge" and run["beams"] == 2 and run["rate"] == "inf"
    assert run["problems"] == 2 and len(run["per_problem"]) == 2
    assert 0 <= run["accuracy"] <= 1
    assert run["throughput_tok_s"] > 0 and run["generated_tokens"] > 0
    assert run["prm_calls"] > 0 and run["gen_time_s"] > 0 and run["rows_per_pass"] >= 1
    assert {p["gold"] for p in run["per_problem"]} == {"18", "3"}
    # the final candidates, best first, each standing for `potential` of the 2 beams
    for p in run["per_problem"]:
        assert 1 <= sum(c["potential"] for c in p["paths"]) <= 2
        assert [c["score"] for c in p["paths"]] == sorted(
            (c["score"] for c in p["paths"]), reverse=True
        )
        # the default aggregation, last: a path's score is its last scored step's
        for c in p["paths"]:
            scored = [s for s in c["step_scores"] if s is not None]
            assert scored and c["score"] == scored[-1]
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 1 and rows[0]["policy"] == "edge"
    assert (out / "throughput_goodput.png").stat().st_size > 0
    assert (out / "accuracy_compute.png").stat().st_size > 0
    assert "edge" in capsys.readouterr().out


def test_plots_that_cannot_be_written_are_a_note_after_the_table(tmp_path, capsys, gsm8k_path):
    """A folder where a plot goes was an IsADirectoryError traceback after every run, and no
    table."""
    out = tmp_path / "bench"
    (out / "throughput_goodput.png").mkdir(parents=True)
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "1",
            "--policies",
            "baseline",
            "--beams",
            "2",
            "--width",
            "2",
            "--max-steps",
            "1",
            "--max-step-tokens",
            "8",
            "--kv-tokens",
            "2048",
            "--model",
            "smollm2-135m",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0 and "Traceback" not in captured.err and "baseline" in captured.out
    note = (
        "edgereason: note: the plots were not written (Is a directory: "
        f"{out}/throughput_goodput.png)"
    )
    assert note in captured.err
    assert json.loads((out / "results.json").read_text())["runs"][0]["problems"] == 1


def test_a_bench_keeps_each_runs_speed_for_backend_auto(
    tmp_path, capsys, gsm8k_path, smollm2_path, monkeypatch
):
    """Two problems at once: a run of the many-at-once job, its tokens and seconds as results.json
    has them; --verbose ends with the start-up's phases."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    out = tmp_path / "bench"
    args = ["--dataset", str(gsm8k_path), "--limit", "2", "--policies", "baseline", "--beams", "2"]
    args += ["--width", "2", "--max-steps", "1", "--max-step-tokens", "8", "--kv-tokens", "2048"]
    args += ["--model", str(smollm2_path), "--out", str(out), "--no-plots", "--verbose"]
    assert main(["bench", *args]) == 0
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    (by_job,) = json.loads((tmp_path / "home" / SPEED_FILE).read_text()).values()
    (kept,) = by_job["many-at-once"]["llamacpp"]
    assert kept["tokens"] == run["generated_tokens"] > 0
    assert kept["search_s"] == round(run["wall_s"], 3)
    assert "edgereason: start-up phases (s): " in capsys.readouterr().err


def test_missing_dataset_is_a_clear_error(tmp_path, capsys):
    rc = main(
        [
            "bench",
            "--dataset",
            str(tmp_path / "none.jsonl"),
            "--policies",
            "baseline",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    assert "dataset file not found" in capsys.readouterr().err


def test_negative_concurrency_is_a_clear_error(tmp_path, capsys, gsm8k_path):
    rc = main(
        ["bench", "--dataset", str(gsm8k_path), "--concurrency", "-1", "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    assert "--concurrency must be 0 (no limit) or more, got -1" in capsys.readouterr().err


@pytest.mark.slow
def test_kv_splits_run_side_by_side(tmp_path, gsm8k_path):
    out = tmp_path / "bench"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "1",
            "--policies",
            "baseline",
            "--beams",
            "2",
            "--width",
            "2",
            "--max-steps",
            "2",
            "--max-step-tokens",
            "24",
            "--kv-budget",
            "24MiB",
            "--split",
            "profile,even",
            "--model",
            "smollm2-135m",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == ["baseline@profile", "baseline@even"]
    assert all(r["generated_tokens"] > 0 and r["peak_kv_tokens"] > 0 for r in runs)


@pytest.mark.slow
def test_strategies_and_splits_run_side_by_side_under_auto(tmp_path, gsm8k_path):
    out = tmp_path / "bench"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "1",
            "--policies",
            "auto",
            "--beams",
            "2",
            "--width",
            "2",
            "--max-steps",
            "2",
            "--max-step-tokens",
            "24",
            "--kv-budget",
            "24MiB",
            "--strategy",
            "beam,best-of-n",
            "--split",
            "profile,even",
            "--model",
            "smollm2-135m",
            "--no-plots",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == [
        "auto/beam@profile",
        "auto/beam@even",
        "auto/best-of-n@profile",
        "auto/best-of-n@even",
    ]
    assert [r["strategy"] for r in runs] == ["beam", "beam", "best-of-n", "best-of-n"]
    # the label is the run's name only: each run still resolved `auto` to a preset
    assert all(
        r["auto_policy"]["preset"] in ("baseline", "edge") and r["generated_tokens"] > 0
        for r in runs
    )


def test_unknown_or_impossible_strategy_is_a_clear_error_before_any_work(
    tmp_path, capsys, gsm8k_path
):
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--strategy",
            "beam,greedy",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    assert "--strategy takes beam, best-of-n, dvts; got greedy" in capsys.readouterr().err
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--strategy",
            "best-of-n,beam",
            "--beams",
            "1,4",
            "--width",
            "4",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    # beam N=1 with width 4: what to run instead
    assert "--strategy best-of-n" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "flag, values",
    [
        ("--policies", "edge,baseline, edge"),
        ("--beams", "4,8,4"),
        ("--strategy", "beam,beam"),
        ("--split", "even,even"),
    ],
)
def test_a_value_named_twice_is_a_clear_error_before_any_work(
    tmp_path, capsys, gsm8k_path, flag, values
):
    rc = main(["bench", "--dataset", str(gsm8k_path), flag, values, "--out", str(tmp_path / "o")])
    assert rc == 2
    assert f"{flag} names {values.split(',')[-1].strip()} more than once" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flag", "values"), [("--beams", "4,,8"), ("--policies", "edge,"), ("--rate", ",inf")]
)
def test_an_empty_value_in_a_list_is_a_clear_error_before_any_work(
    tmp_path, capsys, gsm8k_path, flag, values
):
    """--beams 4,,8 ran 4 and 8 without a word."""
    rc = main(["bench", "--dataset", str(gsm8k_path), flag, values, "--out", str(tmp_path / "o")])
    assert rc == 2 and f"{flag} {values!r} has an empty value" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "flag, values, alike",
    [
        ("--rate", "0.5,2,.5", "0.5 and .5"),
        ("--rate", "inf,Infinity", "inf and Infinity"),
        ("--beams", "4,04", "4 and 04"),
    ],
)
def test_one_value_spelled_twice_is_a_clear_error_before_any_work(
    tmp_path, capsys, gsm8k_path, flag, values, alike
):
    """Ran the configuration twice under one label: the tables showed two rows alike, --compare
    averaged them."""
    rc = main(["bench", "--dataset", str(gsm8k_path), flag, values, "--out", str(tmp_path / "o")])
    assert rc == 2
    assert f"{flag} names one value twice ({alike})" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_unknown_split_is_a_clear_error(tmp_path, capsys, gsm8k_path):
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--split",
            "even,half",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    assert "--split takes profile, even; got half" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_with_an_hf_prm_on_torch(tmp_path, gsm8k_path, tiny_hf_path):
    out = tmp_path / "bench"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "1",
            "--policies",
            "baseline",
            "--beams",
            "2",
            "--width",
            "2",
            "--max-steps",
            "2",
            "--max-step-tokens",
            "16",
            "--kv-tokens",
            "2048",
            "--model",
            "smollm2-135m",
            "--prm",
            f"hf:{tiny_hf_path}",
            "--prm-format",
            "judge",
            "--prm-device",
            "cpu",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert run["problems"] == 1 and run["generated_tokens"] > 0
    assert run["prm_calls"] > 0 and run["prm_tokens"] > 0


def test_plots_beside_a_crashing_cuda_build_are_refused_before_any_work(
    tmp_path, capsys, gsm8k_path, monkeypatch
):
    """A llama.cpp build with its own C++ runtime crashes when matplotlib loads after it (issue 13):
    bench says so and how to rebuild before it opens a model or writes anything."""
    from edgereason.backends import cxx_runtime

    monkeypatch.setattr(cxx_runtime, "private_cxx_runtime", lambda: tmp_path / "libggml-cuda.so.0")
    out = tmp_path / "o"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--limit",
            "1",
            "--model",
            "smollm2-135m",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "bench's plots load matplotlib" in err
        and "--no-plots" in err
        and "Traceback" not in err
    )
    assert not out.exists()


def test_several_splits_without_a_budget_are_a_clear_error_before_any_work(
    tmp_path, capsys, gsm8k_path
):
    """Without --kv-budget each model gets --kv-tokens whatever the split: the bench ran the same
    configuration once per split (twice the time, both sessions' KV memory at once) and tabled the
    runs as different splits."""
    out = tmp_path / "o"
    rc = main(
        [
            "bench",
            "--dataset",
            str(gsm8k_path),
            "--split",
            "profile,even",
            "--model",
            str(tmp_path / "absent.gguf"),
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "--split profile,even compares ways to split a KV budget; give --kv-budget SIZE" in err
    )
    assert not out.exists()
