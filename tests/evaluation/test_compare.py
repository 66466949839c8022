"""`edgereason bench --compare BASE NEW` on small synthetic results files."""

from __future__ import annotations

import json

from edgereason.cli.main import main


def _write(
    folder,
    throughput: float,
    repeats: int = 1,
    config: dict | None = None,
    interrupted: bool = False,
) -> None:
    folder.mkdir()
    runs = [
        {
            "policy": "edge",
            "beams": 4,
            "rate": "inf",
            "repeat": r,
            "accuracy": 0.5,
            "throughput_tok_s": throughput,
            "goodput_tok_s": throughput / 2,
            "latency_s_mean": 10.0,
            "normalized_latency_ms_mean": 100.0,
            "waiting_ratio_median": 0.2,
            "prm_calls": 10,
            "wall_s": 20.0,
        }
        for r in range(repeats)
    ]
    runs.append(
        {**runs[0], "policy": "baseline"} if folder.name == "a" else {**runs[0], "beams": 8}
    )
    runs[0]["interrupted"] = interrupted
    (folder / "results.json").write_text(json.dumps({"config": config or {}, "runs": runs}))


def test_compare_prints_ratios(tmp_path, capsys):
    _write(tmp_path / "a", 100.0)
    _write(tmp_path / "b", 150.0, repeats=2)
    assert main(["bench", "--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    edge = next(line for line in out.splitlines() if line.startswith("edge ") and "1.50x" in line)
    assert "1.00x" in edge
    assert "only in" in out


def test_compare_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert main(["bench", "--compare", str(tmp_path / "x"), str(tmp_path / "y")]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_compare_notes_unlike_settings_and_interrupted_runs(tmp_path, capsys):
    same = {"dataset": "gsm8k.jsonl", "max_steps": 20, "started": "then", "policies": ["edge"]}
    _write(tmp_path / "a", 100.0, config=same)
    _write(tmp_path / "b", 150.0, config={**same, "started": "now", "policies": ["baseline"]})
    assert main(["bench", "--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "note:" not in capsys.readouterr().err  # when they ran and what they compare may differ
    _write(tmp_path / "c", 150.0, config={**same, "max_steps": 2}, interrupted=True)
    assert main(["bench", "--compare", str(tmp_path / "a"), str(tmp_path / "c")]) == 0
    captured = capsys.readouterr()
    assert "note: the benches differ in max_steps: 20 against 2" in captured.err
    assert f"note: edge beams=4 rate=inf in {tmp_path / 'c'} was interrupted" in captured.err
    assert "1.50x" in captured.out  # the ratios are still printed
