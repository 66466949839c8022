"""Install, from a folder of wheels and with no network, each wheel whose distribution this Python
does not have yet, into a target folder (`--no-deps`: the folder is the resolved set). What the
machine has (torch, transformers, numpy) stays as it is, so a served engine's wheels cannot replace
the torch that the project's own runs use.

    python3 benchmarks/lab/install_missing_wheels.py /root/vw /root/vsite
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_name(wheel: Path) -> str:
    return normalized(wheel.name.split("-")[0])


def installed() -> set[str]:
    return {normalized(d.metadata["Name"]) for d in metadata.distributions()}


def main() -> None:
    folder, target = Path(sys.argv[1]), Path(sys.argv[2])
    have = installed()
    wheels = sorted(folder.glob("*.whl"))
    missing = [w for w in wheels if dist_name(w) not in have]
    here = len(wheels) - len(missing)
    print(f"{len(wheels)} wheels, {here} already here, installing {len(missing)}")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    subprocess.run([*cmd, "--target", str(target), *map(str, missing)], check=True)


if __name__ == "__main__":
    main()
