"""What a real `solve` says of its start-up and keeps of its speed (SmolLM2 on llama.cpp, on the
CPU): `startup_s` in --json, the phases with --verbose, and the run in backend-speed.json that
`--backend auto` compares."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from edgereason.session.speed_log import SPEED_FILE

SMALL = ("--beams", "2", "--width", "2", "--max-steps", "1", "--max-step-tokens", "8")


def test_solve_times_its_start_up_and_keeps_its_speed(smollm2_path, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", "solve", "What is 2+3?", "--model", str(smollm2_path)]
        + ["--gpu-layers", "0", "--kv-tokens", "1024", "--json", "--verbose", *SMALL],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "EDGEREASON_HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    startup = out["startup_s"]
    # llama.cpp's phases: no graphs captured, nothing compiled
    assert list(startup) == [
        "import",
        "model_files",
        "weights",
        "kv",
        "first_pass",
        "before_search",
    ]
    assert startup["import"] > 0 and startup["weights"] > 0 and startup["first_pass"] > 0
    before = sum(startup[p] for p in ("import", "model_files", "weights", "kv"))
    assert before <= startup["before_search"] < 300
    (line,) = [x for x in proc.stderr.splitlines() if "start-up phases" in x]
    assert line.startswith("edgereason: start-up phases (s): import ")
    assert "weights to the device" in line and "KV allocated" in line and "first pass" in line
    assert f"the search began {startup['before_search']:.2f} s after the command" in line
    (by_key,) = json.loads((tmp_path / SPEED_FILE).read_text()).values()
    (run,) = by_key["solve"]["llamacpp"]
    assert run["tokens"] == out["metrics"]["generated_tokens"] > 0
    assert run["startup_s"] == startup["before_search"] and run["search_s"] > 0
