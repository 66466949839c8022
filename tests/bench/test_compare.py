"""`edgereason bench --compare BASE NEW` on small synthetic results files."""

from __future__ import annotations

import json

from edgereason.cli.main import main


def _write(folder, throughput: float, repeats: int = 1) -> None:
    folder.mkdir()
    runs = [{"policy": "edge", "beams": 4, "rate": "inf", "repeat": r, "accuracy": 0.5,
             "throughput_tok_s": throughput, "goodput_tok_s": throughput / 2, "latency_s_mean": 10.0,
             "normalized_latency_ms_mean": 100.0, "waiting_ratio_median": 0.2, "prm_calls": 10, "wall_s": 20.0}
            for r in range(repeats)]
    runs.append({**runs[0], "policy": "baseline"} if folder.name == "a" else {**runs[0], "beams": 8})
    (folder / "results.json").write_text(json.dumps({"config": {}, "runs": runs}))


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
