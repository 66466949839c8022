"""The printing boundary (issue 55, item 2): every C0 and C1 control character and the common escape
sequences, put where a model, a server or a results file puts text, reach no terminal raw: solve's
answer, steps, reason and --show-tree, bench's table and --compare, error lines (a user error's and
the last resort's). The chat UI's: tests/ui/test_chat_input.py; a server's message:
tests/backends/remote/test_untrusted_answers.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from edgereason.cli import models_cmd
from edgereason.cli.main import main
from edgereason.cli.solve import print_text
from edgereason.engine.result import FinalPath, RequestMetrics, SearchResult
from edgereason.errors import ConfigError
from edgereason.evaluation.report import print_compare, print_table
from tests.util.test_terminal import C0, C1, SEQUENCES

EVIL = "".join(C0 + C1) + "".join(SEQUENCES) + "[bold]markup[/bold]"
RAW = set(C0 + C1) | {"\u202e"}


def raw_controls(text: str) -> set[str]:
    return {c for c in text if c in RAW}


def evil_result() -> SearchResult:
    steps = [(f"Step {EVIL}\n\nmore", 0.5), (f"\\boxed{{{EVIL}}}", 0.9)]
    path = FinalPath(steps, 0.9, EVIL, node_id=2)
    tree = [
        {"id": 1, "parent": None, "depth": 1, "text": EVIL, "score": 0.5, "status": "selected"},
        {"id": 2, "parent": 1, "depth": 2, "text": EVIL, "score": 0.9, "status": "complete"},
    ]
    for node in tree:
        node.update(finish="answer", potential=1)
    return SearchResult("r", "q", EVIL, [path], tree, RequestMetrics(), "failed", f"reason {EVIL}")


def test_solve_prints_model_text_and_the_tree_as_text(capsys) -> None:
    print_text(evil_result(), show_tree=True)
    out, err = capsys.readouterr()
    assert not raw_controls(out) and not raw_controls(err)
    assert "\\x1b]0;owned\\x07" in out and "\\x9b31m" in out and "[bold]markup[/bold]" in out
    assert "reason \\x00" in err


def bench_run(policy: str) -> dict:
    fields = ["accuracy", "throughput_tok_s", "goodput_tok_s", "latency_s_mean", "latency_s_p90"]
    fields += ["normalized_latency_ms_mean", "waiting_ratio_median", "gen_time_s", "prm_time_s"]
    fields += ["other_time_s", "prm_calls", "rows_per_pass", "wall_s"]
    run = {"policy": policy, "beams": 4, "rate": "inf", "repeat": 0, **dict.fromkeys(fields, 1)}
    run["requests_per_server"] = {f"http://h{EVIL}:1": {"generator": 3}}
    return run


def test_bench_prints_names_from_a_results_file_as_text(tmp_path: Path, capsys) -> None:
    """--compare reads folders anyone may have written: their policy names and settings were printed
    as they were."""
    print_table([bench_run(EVIL)], file=sys.stdout)
    for name in ("base", "new"):
        (tmp_path / name).mkdir()
        results = {"config": {"model": f"{name}{EVIL}"}, "runs": [bench_run(EVIL)]}
        (tmp_path / name / "results.json").write_text(json.dumps(results))
    print_compare(tmp_path / "base", tmp_path / "new", file=sys.stdout)
    out, err = capsys.readouterr()
    assert not raw_controls(out) and not raw_controls(err)
    assert out.count("\\x1b[2J") >= 3


@pytest.mark.parametrize(
    "error", [ConfigError(EVIL), RuntimeError(EVIL)], ids=["user error", "bug"]
)
def test_error_lines_are_text(error: Exception, monkeypatch, tmp_path: Path, capsys) -> None:
    """A user error quotes data or a server; the last resort quotes any exception."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))

    def fail(args: object) -> int:
        raise error

    monkeypatch.setattr(models_cmd, "run_list", fail)
    code = main(["models"])
    err = capsys.readouterr().err
    assert code == (2 if isinstance(error, ConfigError) else 1)
    assert err.startswith("edgereason: error: ") and not raw_controls(err)
