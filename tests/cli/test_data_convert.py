"""`edgereason data convert`: GSM8K's own format (`question`, `#### N`) and MATH's (`problem`,
`solution` with \\boxed{}) made EdgeReason's, one stderr line per skipped record; `--dataset -`
reads the result from stdin."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgereason.search.dataset import load_problems

REPO = Path(__file__).resolve().parents[2]
TRAIN_SAMPLE = REPO / "examples" / "gsm8k_train_sample.jsonl"
# MATH-500 records (Hendrycks et al., MIT): MATH's fields, and MATH-500's own `answer` as the gold
MATH = [
    {
        "unique_id": "test/algebra/2584.json",
        "problem": "If $f(x) = \\frac{3x-2}{x-2}$, what is the value of $f(-2) +f(-1)+f(0)$? "
        "Express your answer as a common fraction.",
        "solution": "$f(-2)+f(-1)+f(0)=\\frac{3(-2)-2}{-2-2}+\\frac{3(-1)-2}{-1-2}"
        "+\\frac{3(0)-2}{0-2}=\\frac{-8}{-4}+\\frac{-5}{-3}+\\frac{-2}{-2}=2+\\frac{5}{3}+1"
        "=\\boxed{\\frac{14}{3}}$",
        "level": "Level 2",
        "type": "Algebra",
        "gold": "\\frac{14}{3}",
    },
    {
        "unique_id": "test/algebra/2036.json",
        "problem": "What is the distance, in units, between the points $(2, -6)$ and $(-4, 3)$? "
        "Express your answer in simplest radical form.",
        "solution": "We use the distance formula:  \\begin{align*}\n"
        "\\sqrt{(2 - (-4))^2 + ((-6) - 3)^2} &= \\sqrt{6^2 + (-9)^2}\\\\\n"
        "& = \\sqrt{36 + 81}\\\\\n& = \\sqrt{117} = \\boxed{3\\sqrt{13}}.\n\\end{align*}",
        "level": "Level 3",
        "type": "Algebra",
        "gold": "3\\sqrt{13}",
    },
]


def edgereason(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def gsm8k_own_format(rows: list[dict]) -> str:
    """The records as GSM8K publishes them (grade_school_math/data/*.jsonl): the shipped sample was
    made from them, its `solution` the worked answer before `#### N`."""
    records = [
        {"question": r["problem"], "answer": f"{r['solution']}\n#### {r['answer']}"} for r in rows
    ]
    return "".join(json.dumps(r) + "\n" for r in records)


def sample() -> list[dict]:
    return [json.loads(line) for line in TRAIN_SAMPLE.read_text().splitlines()]


def test_gsm8k_in_its_own_format_converts_to_the_shipped_sample(tmp_path) -> None:
    rows = sample()
    given = tmp_path / "train.jsonl"
    given.write_text(gsm8k_own_format(rows))
    out = tmp_path / "converted.jsonl"
    proc = edgereason("data", "convert", str(given), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"converted {len(rows)} records (gsm8k) to {out}; skipped 0"
    converted = [json.loads(line) for line in out.read_text().splitlines()]
    keys = ("problem", "answer", "solution")
    assert [{k: r[k] for k in keys} for r in converted] == [{k: r[k] for k in keys} for r in rows]
    assert len(load_problems(out)) == len(rows)  # what bench and train-prm read


def test_math_takes_the_last_boxed_answer_and_keeps_its_labels(tmp_path) -> None:
    given = "".join(json.dumps({k: v for k, v in r.items() if k != "gold"}) + "\n" for r in MATH)
    proc = edgereason("data", "convert", "-", stdin=given)
    assert proc.returncode == 0, proc.stderr
    converted = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["answer"] for r in converted] == [r["gold"] for r in MATH]
    assert [r["id"] for r in converted] == [r["unique_id"] for r in MATH]
    assert all(r["source"] == "math" and r["level"] and r["type"] for r in converted)


def test_each_skipped_record_is_one_line_with_its_line_number_and_why(tmp_path) -> None:
    good = gsm8k_own_format(sample()[:2]).splitlines()
    lines = [
        good[0],
        json.dumps({"question": "How many?", "answer": "Two apples and two more."}),  # no #### N
        "not json",
        json.dumps({"problem": "Find x.", "solution": "So x is 3."}),  # no \boxed{}
        json.dumps({"text": "a record of neither shape"}),
        "",
        good[1],
        json.dumps({"id": "dup", "problem": "1+1?", "answer": "2"}),
        json.dumps({"id": "dup", "problem": "2+2?", "answer": "4"}),
    ]
    given = tmp_path / "mixed.jsonl"
    given.write_text("\n".join(lines) + "\n")
    proc = edgereason("data", "convert", str(given))
    assert proc.returncode == 0, proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("edgereason: skipped")]
    assert [line.split(": ")[1].rsplit(":", 1)[1] for line in skipped] == ["2", "3", "4", "5", "9"]
    assert "'#### N'" in skipped[0] and "\\boxed" in skipped[2] and "'dup'" in skipped[4]
    assert len(proc.stdout.splitlines()) == 3
    assert proc.stderr.splitlines()[-1].endswith("skipped 5")


def test_adversarial_records_are_skipped_in_a_moment(tmp_path) -> None:
    """A MATH solution of 160 KB of unclosed `\\boxed{` took 114 s, a GSM8K answer of 10 KB of a
    `####`, spaces and no last line `#### N` over 15 minutes."""
    rows = [
        {"problem": "Find x.", "solution": "\\boxed{" * 23_000},
        {"question": "How many?", "answer": "#### " + " " * 5_000 + "x" * 5_000 + "\nmore"},
        {"problem": "1+1?", "solution": "So \\boxed{" * 2_000 + "2}"},
    ]
    given = tmp_path / "adversarial.jsonl"
    given.write_text("".join(json.dumps(r) + "\n" for r in rows))
    t0 = time.monotonic()
    proc = edgereason("data", "convert", str(given))
    took = time.monotonic() - t0
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("edgereason: skipped")]
    assert len(skipped) == 2 and "\\boxed" in skipped[0] and "'#### N'" in skipped[1]
    assert json.loads(proc.stdout)["answer"] == "2"
    assert took < 30, took  # the start of Python and the package, on a loaded machine


def test_nothing_to_convert_is_one_error_line(tmp_path) -> None:
    given = tmp_path / "bad.jsonl"
    given.write_text('{"text": "no problem here"}\n')
    proc = edgereason("data", "convert", str(given), "--out", str(tmp_path / "out.jsonl"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("edgereason: error: ")
    assert "no record could be converted (1 skipped" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "out.jsonl").exists()


def test_a_dataset_of_dash_is_read_from_stdin(monkeypatch) -> None:
    import io

    text = TRAIN_SAMPLE.read_text()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    problems = load_problems("-", limit=3, offset=1)
    assert [p.id for p in problems] == [r["id"] for r in sample()[1:4]]


@pytest.mark.slow
def test_a_converted_set_piped_into_bench(tmp_path, smollm2_path) -> None:
    """`edgereason data convert train.jsonl | edgereason bench --dataset - ...`, the two real
    commands."""
    given = tmp_path / "train.jsonl"
    given.write_text(gsm8k_own_format(sample()[:3]))
    converted = edgereason("data", "convert", str(given))
    out = tmp_path / "bench"
    tiny = [
        "--beams",
        "2",
        "--width",
        "2",
        "--max-steps",
        "1",
        "--max-step-tokens",
        "8",
        "--no-plots",
    ]
    args = [
        "bench",
        "--dataset",
        "-",
        "--limit",
        "2",
        "--policies",
        "baseline",
        "--out",
        str(out),
        *tiny,
    ]
    proc = edgereason(*args, "--model", str(smollm2_path), stdin=converted.stdout)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert [p["gold"] for p in run["per_problem"]] == [r["answer"] for r in sample()[:2]]
    # GSM8K's records have no ids: they are named by line
    assert [p["id"] for p in run["per_problem"]] == ["gsm8k-1", "gsm8k-2"]
    assert "answers (baseline N=2, 2 of 2):" in proc.stdout  # printed beside the table


def test_what_bench_would_refuse_is_skipped_not_written(tmp_path) -> None:
    """NaN and Infinity gold answers were written as "nan" and "inf", and ids that were lists,
    objects or true as they were: bench then refused the set (or graded against "nan")."""
    given = tmp_path / "own.jsonl"
    given.write_text(
        '{"problem": "a?", "answer": NaN}\n{"problem": "b?", "answer": -Infinity}\n'
        '{"id": [1], "problem": "c?", "answer": 1}\n{"id": true, "problem": "d?", "answer": 1}\n'
        '{"id": {"a": 1}, "problem": "e?", "answer": 1}\n'
        '{"id": 7, "problem": "f?", "answer": 2.5}\n'
    )
    out = tmp_path / "converted.jsonl"
    proc = edgereason("data", "convert", str(given), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    skipped = [line.split(": ", 2)[2] for line in proc.stderr.splitlines()[:-1]]
    assert skipped == [
        "'answer' is NaN; give one gold answer as a string or a number",
        "'answer' is infinite; give one gold answer as a string or a number",
        "'id' is a list; give the id as a string or a whole number",
        "'id' is true; give the id as a string or a whole number",
        "'id' is an object; give the id as a string or a whole number",
    ]
    assert [(p.id, p.answer) for p in load_problems(out)] == [("7", "2.5")]


def test_a_question_holding_a_line_separator_survives_the_pipe(tmp_path, monkeypatch) -> None:
    """`data convert gsm.jsonl | edgereason bench --dataset -`: convert writes U+2028, U+2029 and
    U+0085 raw, and stdin was split at them ("stdin:1: not a JSON object (Unterminated
    string...)")."""
    import io

    questions = ["Line one\u2028line two: what is 2+2?", "Next\u0085and\u2029what is 3+3?"]
    given = tmp_path / "gsm.jsonl"
    rows = [{"problem": q, "solution": "", "answer": a} for q, a in zip(questions, "46")]
    given.write_text(gsm8k_own_format(rows), encoding="utf-8")
    converted = subprocess.run(
        [sys.executable, "-m", "edgereason", "data", "convert", str(given)],
        capture_output=True,
        timeout=300,
    )
    assert converted.returncode == 0, converted.stderr
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(converted.stdout)))
    assert [(p.problem, p.answer) for p in load_problems("-")] == list(zip(questions, "46"))


def test_stdout_closed_is_one_line(tmp_path) -> None:
    """Started with stdout closed (`>&-`): an "unexpected AttributeError" before."""
    given = tmp_path / "train.jsonl"
    given.write_text(gsm8k_own_format(sample()[:1]))
    script = f'"{sys.executable}" -m edgereason data convert "{given}" >&-'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr == (
        "edgereason: error: stdout is closed, so the converted set would be lost; give --out FILE\n"
    )
