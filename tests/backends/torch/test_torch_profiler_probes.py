"""memory-profile on the torch backend (backends/torch/profiler_probes.py), with SmolLM2 on the CPU:
the numbers are torch's (its KV cache, its float32 weights, its passes), and the profile is found by
torch sessions only."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import edgereason.backends.torch as torch_backend
from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.cli.main import main
from edgereason.errors import ConfigError
from edgereason.heads.value_head import Backbone, ValueHead
from edgereason.profiler import run as profiler
from edgereason.profiler.run import MeasurePoints
from edgereason.session.opening import DEFAULT_LV_THRESHOLD, open_session
from edgereason.session.settings import ModelSettings

TINY = MeasurePoints(decode_seqs=(1, 2), decode_steps=2, prefill_tokens=(32, 64), prefill_reps=1)
SMALL = [
    "--kv-budget",
    "24MiB",
    "--beams",
    "2",
    "--width",
    "2",
    "--steps",
    "2",
    "--max-step-tokens",
    "8",
    "--json",
]


@pytest.fixture()
# smollm2_path first: it resolves under the real home
def home(tmp_path, monkeypatch, smollm2_path):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    return tmp_path


def _float32_bytes(path: Path) -> int:
    """The GGUF's parameters in float32, counted from its tensor table."""
    from gguf import GGUFReader

    return 4 * sum(int(t.n_elements) for t in GGUFReader(str(path)).tensors)


def _profile(smollm2_path: Path, capsys, *argv: str) -> tuple[dict, str]:
    rc = main(["memory-profile", "--model", str(smollm2_path), *argv, *SMALL])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out), out.err


@pytest.mark.slow  # float32 torch on the CPU: the curves and a sample search
def test_memory_profile_measures_the_torch_backend(
    home, smollm2_path, torch_smollm2, monkeypatch, capsys
):
    monkeypatch.setattr(profiler, "MeasurePoints", lambda: TINY)
    # the note is said once a process; earlier tests said it
    monkeypatch.setattr(torch_backend, "_cpu_noted", False)
    data, err = _profile(smollm2_path, capsys, "--backend", "torch", "--device", "cpu")
    assert data["backend"] == "torch" and "the torch backend runs on the CPU in float32" in err
    assert data["generator_kv_bytes_per_token"] == data["verifier_kv_bytes_per_token"]
    assert data["generator_kv_bytes_per_token"] == torch_smollm2.kv_bytes_per_token
    # its weights as torch holds them, not the 4-bit file: four bytes a parameter
    assert (
        data["generator_weights_bytes"]
        == _float32_bytes(smollm2_path)
        > 4 * smollm2_path.stat().st_size
    )
    # the generator's own model serves as the PRM: one load, counted once
    assert data["verifier_weights_bytes"] == 0
    assert [n for n, _ in data["curves"]["generator"]] == [1, 2]
    assert [b for b, _ in data["curves"]["verifier"]] == [32, 64]
    assert all(rate > 0 for curve in data["curves"].values() for _, rate in curve)
    assert (
        Path(data["profile_path"]).name.endswith("__torch.json")
        and Path(data["profile_path"]).is_file()
    )

    settings = ModelSettings(model=str(smollm2_path), kv_budget_bytes=24 << 20, n_gpu_layers=0)
    for backend, profile, lv in (
        ("torch", data, data["lv_threshold_tokens"]),
        ("llamacpp", None, DEFAULT_LV_THRESHOLD["cpu"]),  # torch's profile is not llama.cpp's
    ):
        session = open_session(replace(settings, backend=backend))
        try:
            assert (session.backend, session.profile, session.lv_threshold) == (
                backend,
                profile,
                lv,
            )
        finally:
            session.close()


def test_backend_torch_without_torch_is_one_line_before_measuring(
    home, smollm2_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert main(["memory-profile", "--model", str(smollm2_path), "--backend", "torch", *SMALL]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["error"].startswith(
        "--backend torch needs torch and gguf, which are not installed"
    )
    assert len(out.err.splitlines()) == 1 and 'pip install "edgereason[torch]"' in out.err, out.err


def test_a_value_head_the_model_cannot_feed_is_refused_as_the_prm_is_profiled(smollm2_path):
    """Not when the sample search opens the verifier, after the curves: a head reading layer 99 of
    SmolLM2's 30."""
    head = ValueHead(
        Backbone("smollm2", "x.gguf", "0" * 64),
        tokens=np.zeros(0, dtype=np.int32),
        mean=np.zeros(576, dtype=np.float32),
        std=np.ones(576, dtype=np.float32),
        w2=np.zeros((1, 576), dtype=np.float32),
        b2=np.zeros(1, dtype=np.float32),
        layers=(99,),
    )
    prm = PRMSpec(smollm2_path, "head", head)
    with pytest.raises(
        ConfigError, match=r"reads layers \[99\] of width 576, which .* does not have"
    ):
        load_backend("torch").profiled_prm(prm, Placement(), True, 0)
