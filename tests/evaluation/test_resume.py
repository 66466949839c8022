"""`bench --resume` trusts its results file no longer (issue 62, item 4): results.json is read
against what resuming reads, a file that contradicts itself is refused, and so are problems that
changed since the bench ran (their fingerprint, and the ids and gold answers of those it finished);
results written before the fingerprint still resume, with a note. The fake backend runs the bench's
own code in-process; SmolLM2 runs one resume over changed data end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from damaged_files import WHOLE_FILE
from fakes import FakeGenerator, FakeVerifier

from edgereason.cli.main import main
from edgereason.evaluation import session_runs
from edgereason.evaluation.resume import PROBLEMS_SHA256, problems_sha256
from edgereason.search.dataset import Problem
from edgereason.session.opening import Session
from edgereason.session.settings import ModelSettings

SMALL = ["--policies", "baseline", "--concurrency", "1", "--no-plots", "--beams", "2"]
SMALL += ["--width", "2", "--max-steps", "1", "--max-step-tokens", "4", "--threads", "1"]
SMALL += ["--kv-tokens", "1024"]
PROBLEMS = [{"id": f"p{i}", "problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(4)]


def write_dataset(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture()
def fake(monkeypatch) -> None:
    """Bench's sessions on the fake backend."""

    def session(settings: ModelSettings, progress: object = None) -> Session:
        return Session(settings, FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm"))

    monkeypatch.setattr(session_runs, "open_session", session)


@pytest.fixture()
def cut(tmp_path, fake) -> Callable[..., tuple[Path, Path]]:
    """A bench of PROBLEMS as an interrupted one leaves it (two problems finished), then `edit`ed:
    (the dataset, --out)."""
    data, out = write_dataset(tmp_path / "data.jsonl", PROBLEMS), tmp_path / "out"
    assert main(["bench", "--dataset", str(data), "--out", str(out), *SMALL]) == 0

    def edited(edit: Callable[[dict], object] = lambda results: None) -> tuple[Path, Path]:
        results = json.loads((out / "results.json").read_text())
        run = results["runs"][0]
        run["per_problem"] = run["per_problem"][:2]
        run.update(interrupted=True, problems=2)
        edit(results)
        (out / "results.json").write_text(json.dumps(results))
        return data, out

    return edited


def resume(data: Path, out: Path) -> int:
    return main(["bench", "--dataset", str(data), "--out", str(out), *SMALL, "--resume"])


def one_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "unexpected" not in err[0] and "Traceback" not in err[0], err
    return err[0]


def run0(change: Callable[[dict], object]) -> Callable[[dict], object]:
    return lambda results: change(results["runs"][0])


def problem0(change: Callable[[dict], object]) -> Callable[[dict], object]:
    return lambda results: change(results["runs"][0]["per_problem"][0])


@pytest.mark.parametrize(
    "edit, message",
    [
        (run0(lambda r: r.pop("interrupted")), "runs[0].interrupted is missing"),
        (run0(lambda r: r.pop("per_problem")), "runs[0].per_problem is missing"),
        (problem0(lambda p: p.pop("id")), "runs[0].per_problem[0].id is missing"),
        (
            run0(lambda r: r.update(repeat="x")),
            'runs[0].repeat must be a whole number >= 0, not "x"',
        ),
        (
            run0(lambda r: r.update(per_problem=None)),
            "runs[0].per_problem must be a list, not null",
        ),
        (
            problem0(lambda p: p.update(latency=float("nan"))),
            "runs[0].per_problem[0].latency must be a",
        ),
        (run0(lambda r: r.update(wall_s=float("inf"))), "runs[0].wall_s must be a number >= 0"),
        (lambda results: results["runs"].append(None), "runs[1] must be an object, not null"),
        (lambda results: results.update(config=[]), "config must be an object, not a list of 0"),
        (lambda results: results["config"].update(resumed=5), "config.resumed must be a list"),
    ],
    ids=[
        "no interrupted",
        "no per_problem",
        "no id",
        "repeat x",
        "per_problem null",
        "NaN",
        "Infinity",
        "run null",
        "config list",
        "resumed number",
    ],  # fmt: skip
)
def test_a_results_file_that_lacks_a_field_or_holds_a_wrong_one_is_one_line(
    cut, capsys, edit, message
):
    """Each was "unexpected KeyError/TypeError/ValueError" before."""
    data, out = cut(edit)
    before = (out / "results.json").read_bytes()
    assert resume(data, out) == 2
    line = one_line(capsys)
    assert line.startswith(f"edgereason: error: {out / 'results.json'}: {message}"), line
    assert line.endswith("damaged or edited since the bench wrote it; run into a new --out")
    assert (out / "results.json").read_bytes() == before


@pytest.mark.parametrize("content, message", WHOLE_FILE.values(), ids=WHOLE_FILE.keys())
def test_a_damaged_results_file_is_one_line(cut, capsys, content, message):
    data, out = cut()
    (out / "results.json").write_bytes(content)
    assert resume(data, out) == 2
    assert f"{out / 'results.json'}: {message}" in one_line(capsys)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            run0(lambda r: r["per_problem"].append(r["per_problem"][0])),
            "runs[0].per_problem holds problem 'p0' twice",
        ),
        (
            run0(lambda r: r.update(problems=3)),
            "runs[0] (baseline beams=2 rate=inf rep=0) counts 3",
        ),
        (
            lambda results: results["runs"].append(results["runs"][0]),
            "runs[0] and runs[1] are one run (baseline beams=2 rate=inf rep=0)",
        ),
    ],
    ids=["a problem twice", "a count that is not its records'", "a run twice"],
)
def test_a_results_file_that_contradicts_itself_is_refused(cut, capsys, edit, message):
    """A duplicated record was kept: the resumed run said 3 problems and held 4 records."""
    data, out = cut(edit)
    assert resume(data, out) == 2
    assert f"{out / 'results.json'}: {message}" in one_line(capsys)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda rows: rows[0].update(answer="999"), "problem 'p0' had the answer '1', now '999'"),
        (
            lambda rows: rows[1].update(id="q1"),
            "problem 'p1', which it finished, is not among this command's",
        ),
        # a problem not yet run: only the fingerprint tells
        (
            lambda rows: rows[3].update(problem="What is 30 + 1?"),
            "the problems' ids, texts or answers differ from those it started with",
        ),
    ],
    ids=["a finished problem's answer", "a finished problem's id", "a problem's text"],
)
def test_resume_over_changed_problems_is_refused_saying_what_changed(cut, capsys, change, message):
    """It mixed the old gold answers with the new without a word."""
    data, out = cut()
    rows = [dict(row) for row in PROBLEMS]
    change(rows)
    write_dataset(data, rows)
    assert resume(data, out) == 2
    line = one_line(capsys)
    assert line.startswith(f"edgereason: error: --resume: the bench in {out} ran on other problems")
    assert message in line and line.endswith("run this command into a new --out")


def test_results_without_a_fingerprint_resume_with_a_note(cut, capsys):
    data, out = cut(lambda results: results["config"].pop(PROBLEMS_SHA256))
    assert resume(data, out) == 0
    err = capsys.readouterr().err
    assert "was written before benches recorded their problems' fingerprint" in err
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert [p["id"] for p in run["per_problem"]] == ["p0", "p1", "p2", "p3"]
    assert run["problems"] == 4 and run["resumed"] and not run["interrupted"]


def test_the_fingerprint_covers_ids_texts_and_answers():
    problems = [Problem("a", "What is 1 + 1?", "2"), Problem("b", "x\udce9", "3")]
    same = problems_sha256(problems)
    assert len(same) == 64 and problems_sha256(list(problems)) == same
    for other in (
        [Problem("c", "What is 1 + 1?", "2"), problems[1]],
        [Problem("a", "What is 1 + 2?", "2"), problems[1]],
        [Problem("a", "What is 1 + 1?", "3"), problems[1]],
        problems[::-1],
    ):
        assert problems_sha256(other) != same


def test_smollm2_resume_over_a_changed_answer_is_refused_then_resumes_its_own(
    tmp_path, smollm2_path, capsys, monkeypatch
):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    data = write_dataset(tmp_path / "data.jsonl", PROBLEMS[:2])
    out = tmp_path / "out"
    argv = ["bench", "--dataset", str(data), "--out", str(out), "--model", str(smollm2_path)]
    assert main([*argv, *SMALL]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"][PROBLEMS_SHA256] == problems_sha256(
        [Problem(**row) for row in PROBLEMS[:2]]
    )
    run = results["runs"][0]
    run.update(interrupted=True, problems=1, per_problem=run["per_problem"][:1])
    (out / "results.json").write_text(json.dumps(results))
    write_dataset(data, [{**PROBLEMS[0], "answer": "7"}, PROBLEMS[1]])
    capsys.readouterr()
    assert main([*argv, *SMALL, "--resume"]) == 2
    assert "problem 'p0' had the answer '1', now '7'" in one_line(capsys)
    write_dataset(data, PROBLEMS[:2])
    assert main([*argv, *SMALL, "--resume"]) == 0
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert [p["id"] for p in run["per_problem"]] == ["p0", "p1"] and run["problems"] == 2
