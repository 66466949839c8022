"""The README's Commands block, walked as a new user would: each command runs as written, from the
checkout, with SmolLM2 and a little work in place of the big models (the flags below are appended:
argparse keeps the last of a repeated flag, so every flag the README writes is still parsed and
used). A command the table does not know fails the walk, so a new README command is walked too.

Each runs with stderr to a pipe, as in a log: its progress must hold no carriage returns."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from edgereason import models
from edgereason.cli.main import build_parser

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TINY_SEARCH = ["--max-steps", "1", "--max-step-tokens", "16"]
# what each command gets appended here (the README's flags come first, in force where not repeated)
SMALL = {
    "solve": ["--model", "smollm2-135m", *TINY_SEARCH],
    "bench": [
        "--model",
        "smollm2-135m",
        "--limit",
        "1",
        "--beams",
        "2",
        "--width",
        "2",
        *TINY_SEARCH,
    ],
    "memory-profile": ["--model", "smollm2-135m", "--beams", "2", "--width", "2", "--steps", "1"],
    # SmolLM2 gets every GSM8K problem wrong, so the train phase would have one class to learn
    # from: the walk runs the rollouts, mc and features phases (test_train_prm_cli.py trains a head)
    "train-prm": [
        *("--model", "smollm2-135m", "--limit", "1", "--samples", "2", "--mc-problems", "1"),
        *("--mc-completions", "1", "--max-steps", "2", "--max-tokens", "32"),
        *("--phases", "rollouts,mc,features"),
    ],
    "models": [],
    "data": [],
}
NOT_RUN = {"chat": "needs an interactive terminal (tests/ui drives the app); its flags are parsed"}


def readme_commands() -> list[list[str]]:
    """The `edgereason ...` lines of the README's first bash block under "## Commands", comments
    cut."""
    text = README.read_text()
    block = text.split("## Commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("edgereason ")]


COMMANDS = readme_commands()


def test_the_readme_opens_with_a_venv_then_the_two_commands_and_stays_short() -> None:
    """Copied as one block, the venv comes first, so pip installs into it and not into whatever
    Python is active; install.sh shows llama.cpp's compile (tests/test_install.py); the test line
    takes torch from PyTorch's CPU index, not PyPI's CUDA build."""
    text = README.read_text()
    first = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert len(first) == 3
    venv, solve, tests = first
    assert " -m venv .venv && . .venv/bin/activate" in venv and "pip" not in venv.split("#")[0]
    assert solve.startswith('./install.sh && edgereason solve "')
    assert tests.startswith('pip install -e ".[test,torch]"') and tests.endswith("&& pytest")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in tests
    assert len(text.splitlines()) < 150


def test_each_readme_command_is_walked_or_says_why_not() -> None:
    assert COMMANDS, "no commands found under ## Commands"
    assert not {c[0] for c in COMMANDS} - set(SMALL) - set(NOT_RUN)


@pytest.fixture(scope="module")
def user_home(tmp_path_factory) -> Path:
    """A fresh folder to run in (the README's relative paths: examples/ links to the checkout's) and
    a fresh $EDGEREASON_HOME whose models are the cached ones: profiles, train work and outputs land
    here."""
    here = tmp_path_factory.mktemp("user")
    (here / "examples").symlink_to(REPO / "examples")
    (here / "home").mkdir()
    (here / "home" / "models").symlink_to(models.home() / "models")
    return here


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv", COMMANDS, ids=[" ".join(c[:1] + [a for a in c if a[:2] == "--"]) for c in COMMANDS]
)
def test_a_readme_command_runs_as_written(argv, user_home, smollm2_path) -> None:
    if argv[0] in NOT_RUN:
        build_parser().parse_args(argv)  # its flags as written
        pytest.skip(NOT_RUN[argv[0]])
    env = {**os.environ, "PYTHONPATH": str(REPO), "EDGEREASON_HOME": str(user_home / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", *argv, *SMALL[argv[0]]],
        cwd=user_home,
        env=env,
        capture_output=True,  # bytes: text mode would read each carriage return as a line end
        timeout=600,
    )
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "\r" not in stderr, "progress wrote carriage returns into a log"
