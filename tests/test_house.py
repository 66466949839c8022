"""The rules the code is held to (pyproject.toml): the import contracts, checked by import-linter in
the checkout (the top-level backends/ and ui/ are links to edgereason/backends and edgereason/ui),
and ruff's lint and format checks (the test extra installs both). Size limits: no module over 300
lines, no function over 50."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = [ROOT / "edgereason"]  # backends/ and ui/ included: their files live there
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 50


def test_the_import_contracts_hold():
    """`lint-imports` as a developer runs it in the checkout (the checkout is the package)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_the_top_level_folders_are_the_packages():
    """backends/ and ui/ at the top level are links, kept in git, to the folders that hold the code,
    `edgereason/backends` and `edgereason/ui`: the files live where Python imports them from, so a
    tool that reads the files sees the imports Python sees (docs/design.md section 1)."""
    for name in ("backends", "ui"):
        link, package = ROOT / name, ROOT / "edgereason" / name
        assert link.is_symlink() and link.resolve() == package.resolve(), link
        assert not package.is_symlink() and (package / "__init__.py").is_file(), package


def test_each_file_has_one_module_name():
    """The links give a file under backends/ or ui/ two paths on disk; it keeps one module name, as
    no code imports a top-level `backends` or `ui` (docs/design.md section 1)."""
    top = {"backends", "ui"}
    found = []
    folders = [*CODE, ROOT / "tests", ROOT / "benchmarks"]
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in top]
    assert not found, found


@pytest.mark.parametrize("check", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_finds_nothing(check):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            *check,
            "edgereason",
            "tests",
            "benchmarks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _python_files() -> list[Path]:
    return sorted(p for folder in CODE for p in folder.rglob("*.py"))


def test_no_module_is_over_its_size():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _python_files()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_its_size():
    long = {}
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
