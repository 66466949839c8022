"""`--backend auto` on a GPU that torch runs the models on (faked: this machine has none), reading
faked measurements from $EDGEREASON_HOME/backend-speed.json: the one line it says, and what it
runs."""

from __future__ import annotations

import pytest

from edgereason.backends import load_backend
from edgereason.memory.device import DeviceInfo
from edgereason.session import backend_choice, backend_rule
from edgereason.session.backend_choice import choose_backend
from edgereason.session.backend_rule import Run
from edgereason.session.settings import ModelSettings
from edgereason.session.speed_log import SPEED_FILE, record_run, speed_key

pytest.importorskip("torch")
GPU = DeviceInfo("gpu", "gpu-nvidia-h100", "NVIDIA H100", 80 << 30, 80 << 30)


@pytest.fixture()
def h100(monkeypatch, tmp_path):
    """NVML sees an H100 and torch sees CUDA; no measurement yet."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    monkeypatch.setattr(backend_choice, "gpu_present", lambda: True)
    monkeypatch.setattr(backend_choice, "read_gpu", lambda: GPU)
    monkeypatch.setattr(backend_rule, "read_gpu", lambda: GPU)
    monkeypatch.setattr(load_backend("torch"), "supports_gpu", lambda: True)
    return tmp_path


def _settings(path, workload: str = "solve") -> ModelSettings:
    return ModelSettings(model=str(path), prm_format="judge", workload=workload)


def _choose(path, workload: str = "solve") -> str:
    return choose_backend(_settings(path, workload), path, path, hf=False)


def test_unmeasured_solve_runs_on_llamacpp_and_a_bench_of_many_on_torch(h100, smollm2_path, capsys):
    assert _choose(smollm2_path) == "llamacpp"
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("edgereason: --backend auto runs on llama.cpp for one search a process")
    assert "run a solve once with --backend llamacpp and once with --backend torch" in line
    assert _choose(smollm2_path, "one-at-a-time") == "llamacpp"
    assert _choose(smollm2_path, "many-at-once") == "torch"


def test_measurements_of_both_decide(h100, smollm2_path, capsys):
    key = speed_key(GPU.device_id, _settings(smollm2_path))
    record_run(key, "solve", "llamacpp", Run(2.0, 6.2, 2000))
    record_run(key, "solve", "torch", Run(7.0, 6.5, 2000))
    assert _choose(smollm2_path) == "llamacpp"
    record_run(key, "solve", "torch", Run(1.5, 5.0, 2000))  # a faster start-up
    assert _choose(smollm2_path) == "torch"
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(
        "llama.cpp 8.2 s, torch 13.5 s (command to answer, scaled to "
        "2,000 tokens, each its fastest run)"
    )
    assert "torch 6.5 s, llama.cpp 8.2 s" in lines[1]
    # a bench of many at once: measured llama.cpp faster there
    record_run(key, "many-at-once", "llamacpp", Run(3.0, 100.0, 200_000))
    assert _choose(smollm2_path, "many-at-once") == "torch"  # one measured: the prior
    record_run(key, "many-at-once", "torch", Run(9.0, 100.0, 150_000))
    assert _choose(smollm2_path, "many-at-once") == "llamacpp"


def test_another_gpu_has_measurements_of_its_own(h100, smollm2_path, monkeypatch):
    key = speed_key(GPU.device_id, _settings(smollm2_path))
    record_run(key, "solve", "llamacpp", Run(2.0, 9.0, 2000))
    record_run(key, "solve", "torch", Run(1.0, 5.0, 2000))
    assert _choose(smollm2_path) == "torch"
    h200 = DeviceInfo("gpu", "gpu-nvidia-h200", "NVIDIA H200", 140 << 30, 140 << 30)
    monkeypatch.setattr(backend_choice, "read_gpu", lambda: h200)
    monkeypatch.setattr(backend_rule, "read_gpu", lambda: h200)
    assert _choose(smollm2_path) == "llamacpp"  # the prior


def test_a_damaged_file_is_the_prior_and_one_note(h100, smollm2_path, capsys):
    (h100 / SPEED_FILE).write_text('{"gpu-nvidia-h100": 3}')
    assert _choose(smollm2_path, "many-at-once") == "torch"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "backend-speed.json is damaged (" in err[0]
    assert err[1].startswith("edgereason: --backend auto runs on torch for a bench of several")


def test_the_fallbacks_come_first(h100, smollm2_path, capsys):
    """Measured faster or not, torch runs only where it can: the models must fit."""
    key = speed_key(GPU.device_id, _settings(smollm2_path))
    record_run(key, "solve", "llamacpp", Run(2.0, 9.0, 2000))
    record_run(key, "solve", "torch", Run(1.0, 5.0, 2000))
    assert _choose(smollm2_path) == "torch"
    capsys.readouterr()
    small = ModelSettings(model=str(smollm2_path), prm_format="judge", gpu_memory_bytes=1 << 20)
    assert choose_backend(small, smollm2_path, smollm2_path, hf=False) == "llamacpp"
    (line,) = capsys.readouterr().err.splitlines()
    assert "--backend auto runs on llama.cpp: the models need" in line
    on_cpu = ModelSettings(model=str(smollm2_path), prm_format="judge", n_gpu_layers=0)
    assert choose_backend(on_cpu, smollm2_path, smollm2_path, hf=False) == "llamacpp"
    named = ModelSettings(model=str(smollm2_path), prm_format="judge", backend="llamacpp")
    assert choose_backend(named, smollm2_path, smollm2_path, hf=False) == "llamacpp"


def test_where_llamacpp_is_faster_torch_is_never_asked(h100, smollm2_path, monkeypatch, capsys):
    """Whether torch could run is asked only where torch is the faster choice: the question
    imports torch, 4-5 s of a solve that took 8 s on llama.cpp on an H100 (2026-12-06)."""

    def asked(*_: object) -> str:
        raise AssertionError("torch's fitness was checked for a llama.cpp choice")

    monkeypatch.setattr(backend_choice, "torch_cannot_run", asked)
    assert _choose(smollm2_path) == "llamacpp"  # unmeasured solve: the prior
    key = speed_key(GPU.device_id, _settings(smollm2_path))
    record_run(key, "solve", "llamacpp", Run(2.0, 6.0, 2000))
    record_run(key, "solve", "torch", Run(5.0, 10.0, 2000))
    assert _choose(smollm2_path) == "llamacpp"
    assert "llama.cpp" in capsys.readouterr().err
