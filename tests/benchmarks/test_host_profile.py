"""benchmarks/host_profile.py on the CPU: SmolLM2 on the torch backend, a tiny search one problem at
a time and two at once; the wall splits into the device passes and the host's work, and the host's
top functions leave the passes out."""

from __future__ import annotations

import json
import sys

from benchmarks import host_profile


def test_help_runs_from_the_repository_root(script_help):
    assert "--at-once" in script_help("host_profile.py")


def test_a_cpu_run_splits_the_wall(smollm2_path, monkeypatch, capsys):
    argv = ["host_profile.py", "--model", str(smollm2_path), "--beams", "2", "--max-tokens", "4"]
    rest = ["--max-steps", "1", "--one-at-a-time", "1", "--at-once", "2", "--top", "20"]
    monkeypatch.setattr(sys, "argv", [*argv, *rest, "--kv-tokens", "4096", "--no-warmup"])
    host_profile.main()
    out = json.loads(capsys.readouterr().out)
    assert out["device"] == "cpu"
    for key, at_once in (("one_at_a_time", 1), ("at_once", 2)):
        run = out[key]
        assert run["at_once"] == at_once and run["device_passes"] > 0 and run["tokens"] > 0
        assert abs(run["wall_s"] - run["device_s"] - run["host_s"]) < 0.01
        assert 0 < run["host_fraction"] < 1
        # the host's CPU time, not the wall's: at most its wall seconds (plus the clocks' ticks)
        assert 0 < run["host_cpu_ms_a_pass"] <= run["host_ms_a_pass"] + 1
        functions = [f["function"] for f in run["top_host"]]
        assert len(functions) == 20 and not any("_run" in f and "runtime" in f for f in functions)
        assert any("loop.py" in f for f in functions)  # the engine's step is host work (the order
        # of tiny timings varies, so the top 20, not 5)
