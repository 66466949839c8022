"""The last resort (issue 55, item 1): an exception no check caught is one line, `edgereason: error:
...`, exit 1, its traceback in a log file under $EDGEREASON_HOME/logs named in that line, with
credentials and the API key's value as ***; never a traceback on the terminal."""

from __future__ import annotations

import json
from pathlib import Path

from edgereason.cli import models_cmd, solve
from edgereason.cli.main import main


def crash_with(
    monkeypatch, error: Exception, command: object = models_cmd, name: str = "run_list"
) -> None:
    def fail(args: object) -> int:
        raise error

    monkeypatch.setattr(command, name, fail)


def test_a_bug_is_one_line_naming_its_log(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    crash_with(monkeypatch, KeyError("http://user:pw@h:1 answered"))
    code = main(["models"])
    err = capsys.readouterr().err
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith("edgereason: error: unexpected KeyError: ") and "Traceback" not in err
    (log,) = (tmp_path / "logs").glob("crash-*.log")
    assert f"the traceback in {log})" in line
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError" in text
    assert "pw@" not in text + err and "http://***@h:1" in text
    assert log.stat().st_mode & 0o077 == 0  # the owner's alone


def test_the_api_key_is_hidden_in_the_line_and_the_log(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    monkeypatch.setenv("MY_KEY", "sk-very-secret")
    crash_with(monkeypatch, RuntimeError("the server said sk-very-secret is wrong"), solve, "run")
    assert main(["solve", "x", "--api-key-env", "MY_KEY"]) == 1
    err = capsys.readouterr().err
    (log,) = (tmp_path / "logs").glob("crash-*.log")
    assert "the server said *** is wrong" in err and "sk-very-secret" not in err + log.read_text()


def test_with_json_stdout_holds_one_object(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    crash_with(monkeypatch, RuntimeError("boom"))
    assert main(["models", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["exit_code"] == 1 and out["error"].startswith("unexpected RuntimeError: boom")


def test_a_log_that_cannot_be_written_is_said(monkeypatch, tmp_path: Path, capsys) -> None:
    (tmp_path / "logs").write_text("a file where the folder goes")
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    crash_with(monkeypatch, RuntimeError("boom"))
    assert main(["models"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "its traceback could not be written to" in line
