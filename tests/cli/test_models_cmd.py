"""`edgereason models list|pull|path` as a script runs it: one JSON object with --json, exit codes by the project's
rule (2 a name or setting that cannot work, 1 a model file that is missing or damaged), one line per error.
Every run has its own EDGEREASON_HOME and a package index that refuses at once, so nothing is downloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgereason import models

OFFLINE_INDEX = "http://127.0.0.1:9/"  # the discard port: nothing listens


def models_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(EDGEREASON_HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=OFFLINE_INDEX, PIP_RETRIES="0")
    return subprocess.run([sys.executable, "-m", "edgereason", "models", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_list_json_is_one_object_as_every_other_json_output(tmp_path) -> None:
    """It was a bare array, while --json prints one object everywhere else, failures included."""
    proc = models_cli(tmp_path / "home", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert list(listed) == ["models"]
    assert [m["name"] for m in listed["models"]] == list(models.REGISTRY)
    assert [m["name"] for m in listed["models"] if m["default"]] == [models.DEFAULT_MODEL]
    assert not any(m["cached"] for m in listed["models"])
    assert [m["path"] for m in listed["models"]] == [str(tmp_path / "home" / "models" / s.filename)
                                                     for s in models.REGISTRY.values()]


def one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize("spelled", ["{tmp}/missing.gguf", "{tmp}/missing", "{tmp}/sub/model.bin", "./missing",
                                     "~/edgereason-no-such-model"])
def test_path_of_a_missing_file_is_a_missing_model_file_however_spelled(tmp_path, spelled) -> None:
    """`models path /missing.gguf` exited 1 "not found", `/missing` 2 "unknown model '/missing'": both are files
    that are not there, which the project's rule makes 1 (2 is for a bare name outside the registry)."""
    name = spelled.format(tmp=tmp_path)
    line = one_error_line(models_cli(tmp_path / "home", "path", name), 1)
    assert line.startswith(f"edgereason: error: model file not found: {Path(name).expanduser()}; check the path, "
                           f"or name one of {', '.join(models.REGISTRY)}"), line


@pytest.mark.parametrize("name", ["nosuch", "SmolLM2-135M", "qwen2.5", " smollm2-135m"])
def test_a_bare_name_outside_the_registry_is_an_unknown_name(tmp_path, name) -> None:
    line = one_error_line(models_cli(tmp_path / "home", "path", name), 2)
    assert line == (f"edgereason: error: unknown model {name!r}; known: {', '.join(models.REGISTRY)} (or give a "
                    "path to a .gguf file)")


def test_a_folder_in_place_of_a_gguf_is_called_a_folder(tmp_path) -> None:
    folder = tmp_path / "model.gguf"
    folder.mkdir()
    line = one_error_line(models_cli(tmp_path / "home", "path", str(folder)), 1)
    assert line == f"edgereason: error: model path {folder} is a folder; give the path of a .gguf file"
