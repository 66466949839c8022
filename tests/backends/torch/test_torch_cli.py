"""Choosing the backend: --backend auto|llamacpp|torch on the CLI, and auto's decision."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from edgereason.backends import Placement, load_backend
from edgereason.session import backend_choice, backend_rule
from edgereason.session.backend_choice import choose_backend
from edgereason.session.settings import ModelSettings


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args], capture_output=True, text=True, timeout=600
    )


SMALL = (
    "--beams",
    "2",
    "--width",
    "2",
    "--max-steps",
    "1",
    "--max-step-tokens",
    "8",
    "--kv-tokens",
    "1024",
    "--json",
)


def test_solve_json_names_the_backend_auto_chose_on_a_cpu(smollm2_path):
    proc = run_cli(
        "solve", "What is 2+3?", "--model", str(smollm2_path), "--gpu-layers", "0", *SMALL
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backend"] == "llamacpp"  # a CPU stays on llama.cpp


@pytest.mark.slow  # a search in float32 torch on the CPU
def test_backend_torch_runs_on_the_cpu_and_says_so(smollm2_path):
    """And times its start-up: torch's import, the weights, the KV; no graphs on a CPU."""
    proc = run_cli(
        "solve",
        "What is 2+3?",
        "--model",
        str(smollm2_path),
        "--backend",
        "torch",
        "--gpu-layers",
        "0",
        "--verbose",
        *SMALL,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["backend"] == "torch" and out["metrics"]["prm_calls"] > 0
    assert "the torch backend runs on the CPU in float32" in proc.stderr
    startup = out["startup_s"]
    assert list(startup) == [
        "import",
        "model_files",
        "weights",
        "kv",
        "first_pass",
        "before_search",
    ]
    # torch's import (seconds) beside llama.cpp's: more than llama.cpp's alone (about 0.3 s)
    assert startup["import"] > 0.5 and startup["weights"] > 0 and startup["kv"] > 0
    assert "edgereason: start-up phases (s): import " in proc.stderr


def test_backend_torch_with_gpu_layers_and_no_cuda_is_one_line(smollm2_path):
    if load_backend("torch").supports_gpu():
        pytest.skip("torch sees a CUDA device")
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--model",
        str(smollm2_path),
        "--backend",
        "torch",
        "--gpu-layers",
        "99",
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "sees no CUDA device; drop --gpu-layers" in lines[-1]


# where torch can run, a bench of many problems at once takes it unmeasured (backend_rule.py)
MANY = ModelSettings(workload="many-at-once")


def _fake_gpu(monkeypatch, home, total_bytes: int = 24 << 30, cuda: bool = True) -> None:
    """NVML sees a GPU of `total_bytes` and torch sees CUDA where `cuda` (this machine has
    neither); no speed measured on it."""
    from edgereason.memory.device import DeviceInfo

    monkeypatch.setenv("EDGEREASON_HOME", str(home))
    monkeypatch.setattr(backend_choice, "gpu_present", lambda: True)
    gpu = DeviceInfo("gpu", "gpu-x", "X", total_bytes, total_bytes)
    for room in (backend_choice, backend_rule):  # the speeds' key, and the room torch needs
        monkeypatch.setattr(room, "read_gpu", lambda: gpu)
    if cuda:
        monkeypatch.setattr(load_backend("torch"), "supports_gpu", lambda: True)


def test_auto_can_take_torch_on_cuda_beside_a_gpu_build_of_llamacpp(
    smollm2_path, monkeypatch, tmp_path
):
    """Where torch runs the models on CUDA, auto may take it even where llama.cpp's build offloads
    (which, by workload and measurements: tests/session/test_backend_choice.py); llama.cpp stays a
    choice."""
    _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setattr(load_backend("llamacpp"), "supports_gpu", lambda: True)
    assert choose_backend(MANY, smollm2_path, smollm2_path, hf=False) == "torch"
    assert choose_backend(ModelSettings(), smollm2_path, smollm2_path, hf=False) == "llamacpp"
    assert (
        choose_backend(replace(MANY, backend="llamacpp"), smollm2_path, smollm2_path, hf=False)
        == "llamacpp"
    )


def test_auto_takes_torch_only_with_cuda_and_room(smollm2_path, monkeypatch, capsys, tmp_path):
    torch_backend = load_backend("torch")
    if not torch_backend.supports_gpu():
        _fake_gpu(monkeypatch, tmp_path, cuda=False)  # NVML sees a GPU, torch no CUDA
        assert choose_backend(MANY, smollm2_path, smollm2_path, hf=False) == "llamacpp"
        err = capsys.readouterr().err
        assert "--backend auto runs on llama.cpp: torch" in err and "sees no CUDA device" in err
    # bf16: about 270 MB
    need = torch_backend.weights_bytes(smollm2_path, Placement(n_gpu_layers=1))
    _fake_gpu(monkeypatch, tmp_path, total_bytes=need)
    roomy = replace(MANY, gpu_memory_bytes=4 * need)
    assert choose_backend(roomy, smollm2_path, smollm2_path, hf=False) == "torch"
    tight = replace(MANY, gpu_memory_bytes=need)
    assert choose_backend(tight, smollm2_path, smollm2_path, hf=False) == "llamacpp"
    assert "more than --gpu-memory" in capsys.readouterr().err
    # the GPU is too small
    assert choose_backend(MANY, smollm2_path, smollm2_path, hf=False) == "llamacpp"
    assert "more than the GPU's memory" in capsys.readouterr().err
    _fake_gpu(monkeypatch, tmp_path, total_bytes=4 * need)
    assert choose_backend(MANY, smollm2_path, smollm2_path, hf=False) == "torch"
    named = replace(MANY, backend="llamacpp")
    assert choose_backend(named, smollm2_path, smollm2_path, hf=False) == "llamacpp"
    on_cpu = replace(MANY, n_gpu_layers=0)
    assert choose_backend(on_cpu, smollm2_path, smollm2_path, hf=False) == "llamacpp"


def test_auto_falls_back_in_one_line_on_an_architecture_torch_cannot_run(
    smollm2_path, phi3_gguf, monkeypatch, capsys, tmp_path
):
    _fake_gpu(monkeypatch, tmp_path)
    assert choose_backend(MANY, smollm2_path, phi3_gguf, hf=False) == "llamacpp"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend auto runs on llama.cpp: phi.gguf is a phi3 model" in err[0]
    # an hf: PRM: not torch's
    assert choose_backend(MANY, smollm2_path, phi3_gguf, hf=True) == "torch"


def test_weights_that_do_not_fit_the_gpu_are_one_line(monkeypatch, smollm2_path):
    """torch's out-of-memory while the weights load (CUDA only) becomes one OutOfMemoryError line
    that says how much the weights need, what is free, and what to do: the allocation is simulated,
    as this machine has no GPU."""
    import torch

    from edgereason.backends.torch import model
    from edgereason.errors import OutOfMemoryError

    def no_room(path, device, asked):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")

    monkeypatch.setattr(model, "load_model", no_room)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (2**29, 2**31))
    with pytest.raises(OutOfMemoryError) as e:
        load_backend("torch").open_generator(smollm2_path, 256, Placement(n_gpu_layers=999))
    assert str(e.value) == (
        "SmolLM2-135M-Instruct.Q4_1.gguf needs 0.3 GiB in bf16 on torch, more than the GPU's 0.5 "
        "GiB free of 2.0 GiB; free GPU memory, or use --backend llamacpp, which keeps the weights "
        "quantized"
    )
    # --torch-weights int4: the message counts the weights that were loading
    monkeypatch.setenv("EDGEREASON_TORCH_WEIGHTS", "bf16")
    with pytest.raises(OutOfMemoryError) as e:
        load_backend("torch").open_generator(
            smollm2_path, 256, Placement(n_gpu_layers=999, torch_weights="int4")
        )
    assert str(e.value).startswith("SmolLM2-135M-Instruct.Q4_1.gguf needs 0.1 GiB in int4 on torch")
