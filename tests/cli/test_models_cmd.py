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
