"""Help that fits a screen: every command's --help is at most 50 lines on an 80-column terminal and
names --help-all (or docs/cli.md) at its end; --help-all and docs/cli.md have every flag."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from edgereason.cli.main import build_parser, main

MAX_LINES = 50
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command line that has a --help: the top level, each command, their subcommands."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, (*path, name))
    return found


def parser_of(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")}


COMMANDS = commands(build_parser())


def help_text(path: tuple[str, ...], flag: str, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*path, flag])
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "edgereason")
def test_each_help_fits_a_screen_and_names_where_the_rest_is(path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = help_text(path, "--help", capsys).splitlines()
    assert len(lines) <= MAX_LINES, f"{' '.join(path)} --help is {len(lines)} lines"
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    hidden = flags(parser_of(path)) - {o for line in lines for o in line.replace(",", " ").split()}
    if hidden:  # a brief view: its end says where every flag is
        assert "--help-all" in "\n".join(lines[-3:]) and "docs/cli.md" in "\n".join(lines[-3:])


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "edgereason")
def test_help_all_lists_every_flag(path, capsys) -> None:
    """Every command takes --help-all: `models --help-all` and `data --help-all` were refused (exit
    2); where a command has no brief view it is its --help."""
    text = help_text(path, "--help-all", capsys)
    assert not flags(parser_of(path)) - set(text.replace(",", " ").replace("[", " ").split())


def test_docs_cli_md_has_every_flag_of_every_command() -> None:
    docs = DOCS.read_text()
    missing = {
        (" ".join(path), flag)
        for path in COMMANDS
        for flag in flags(parser_of(path))
        if not flag.startswith("--no-") and flag not in docs
    }
    assert not missing, sorted(missing)


@pytest.mark.parametrize("command", [["models"], ["data"], ["models", "export"]], ids=" ".join)
def test_help_all_of_a_command_with_subcommands_exits_0(command) -> None:
    """As a user types it: it said "unrecognized arguments: --help-all", exit 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", *command, "--help-all"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith(f"usage: edgereason {' '.join(command)} ")


def test_the_console_prints_the_brief_help() -> None:
    """Through the installed entry point's module, as a user types it."""
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", "solve", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) <= MAX_LINES, proc.stdout
