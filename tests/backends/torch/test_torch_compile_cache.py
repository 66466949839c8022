"""torch's compile caches carried between processes (compile_cache.py): a process that compiled
leaves an artifact file, and the next process, its inductor cache removed, compiles from it without
a miss; a damaged file counts as missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from edgereason.backends.torch import compile_cache

# a process that compiles a small function as the passes do (after compile_cache.load), then says
# what inductor's FX graph cache did
PROCESS = """
import json, sys, torch
from pathlib import Path
from torch._dynamo.utils import counters
from edgereason.backends.torch import compile_cache
compile_cache.load(Path("m.gguf"), torch.device("cpu"))
functions = {"silu": lambda x: torch.nn.functional.silu(x) * x + 1, "tanh": lambda x: x.tanh() - x}
for name in sys.argv[1:]:
    torch.compile(functions[name], fullgraph=True)(torch.ones(8))
print(json.dumps(dict(counters["inductor"])))
"""


def _process(home: Path, *functions: str) -> dict[str, int]:
    env = {**os.environ, "EDGEREASON_HOME": str(home)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, *functions],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two processes, each importing torch and compiling
def test_a_process_compiles_from_the_last_ones_artifacts(tmp_path):
    """The artifacts alone (inductor's cache removed) serve the next process; one that compiles
    something more keeps what it loaded; one that compiled nothing new leaves the file alone."""
    first = _process(tmp_path, "silu")
    assert first.get("fxgraph_cache_miss", 0) >= 1
    artifacts = list((tmp_path / "torch").glob(f"{compile_cache.PREFIX}{torch.__version__}-*"))
    assert [p.name for p in artifacts] == [f"{compile_cache.PREFIX}{torch.__version__}-cpu-m.bin"]
    _drop_inductor_cache(tmp_path)
    more = _process(tmp_path, "silu", "tanh")
    assert more.get("fxgraph_cache_hit") == 1 and more.get("fxgraph_cache_miss") == 1
    _drop_inductor_cache(tmp_path)
    written = artifacts[0].stat().st_mtime_ns
    both = _process(tmp_path, "tanh", "silu")
    assert both.get("fxgraph_cache_hit") == 2 and "fxgraph_cache_miss" not in both
    assert artifacts[0].stat().st_mtime_ns == written


def _drop_inductor_cache(home: Path) -> None:
    for inductor in (home / "torch").glob("inductor-*"):
        shutil.rmtree(inductor)  # only the artifact file is left


def test_a_damaged_artifact_file_is_a_missing_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    monkeypatch.setattr(compile_cache, "_loaded", set())
    monkeypatch.setattr(compile_cache.atexit, "register", lambda *args: None)
    monkeypatch.setattr(compile_cache.compiled_layers, "use_cache_dir", lambda: None)
    path = compile_cache.artifact_file(Path("damaged.gguf"), torch.device("cpu"))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x80\x04not a pickle")
    compile_cache.load(Path("damaged.gguf"), torch.device("cpu"))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is damaged" in err[0] and "compiling the passes anew" in err[0]
    assert not path.exists()
