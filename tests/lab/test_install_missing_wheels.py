"""The GPU machine's wheel installer (issue 66): each wheel whose distribution this Python lacks
goes into the target folder, and one it has (the machine's torch, here pytest) is left alone."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from benchmarks.lab.install_missing_wheels import dist_name


def wheel(folder: Path, name: str, version: str) -> Path:
    """An empty but valid wheel of `name`."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        )
        z.writestr(
            f"{dist}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(f"{dist}.dist-info/RECORD", "")
    return path


def test_names_are_read_as_pip_normalizes_them(tmp_path: Path) -> None:
    assert dist_name(Path("PyYAML-6.0.4-cp312-cp312-manylinux2014_x86_64.whl")) == "pyyaml"
    assert dist_name(Path("typing_extensions-4.16.0-py3-none-any.whl")) == "typing-extensions"


def test_only_what_this_python_lacks_is_installed(tmp_path: Path) -> None:
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    wheel(wheels, "edgereason-absent-probe", "1.0")
    wheel(wheels, "pytest", "0.0.1")  # installed here: an old version must not land beside it
    script = (
        Path(__file__).resolve().parents[2] / "benchmarks" / "lab" / "install_missing_wheels.py"
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(wheels), str(target)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 wheels, 1 already here, installing 1" in proc.stdout
    installed = sorted(p.name for p in target.iterdir())
    assert installed == ["edgereason_absent_probe-1.0.dist-info"], installed
