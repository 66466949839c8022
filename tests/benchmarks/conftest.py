"""What the benchmark scripts' tests share: a script's --help, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def script_help() -> Callable[[str], str]:
    """`python benchmarks/<name> --help` from the repository root (where a user runs it, with
    only the repository on the path): its stdout, once it exits 0 without a traceback."""

    def run(name: str) -> str:
        proc = subprocess.run(
            [sys.executable, f"benchmarks/{name}", "--help"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
        return proc.stdout

    return run
