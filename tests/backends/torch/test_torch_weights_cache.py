"""The kept dequantized copy of a GGUF's tensors (weights_cache.py), on SmolLM2 in bf16 (what a GPU
loads)."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.weight_sources import open_weights
from edgereason.backends.torch.weights_cache import CachedWeights, cache_file

CPU = torch.device("cpu")
NAMES = ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "output_norm.weight")


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _no_dequantizing(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("dequantized the GGUF again")

    monkeypatch.setattr(Weights, "load", refuse)


def test_the_copy_is_made_once_and_read_after(smollm2_path, home, monkeypatch):
    direct = {n: Weights(smollm2_path).load(n, CPU, torch.bfloat16) for n in NAMES}
    first = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    assert all(torch.equal(first.load(n, CPU, torch.bfloat16), direct[n]) for n in NAMES)
    assert first.file.is_file() and first.file.parent == home / "torch"
    _no_dequantizing(monkeypatch)
    again = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    assert all(torch.equal(again.load(n, CPU, torch.bfloat16), direct[n]) for n in NAMES)


def test_only_bf16_is_kept(smollm2_path, home):
    assert isinstance(open_weights(smollm2_path, torch.bfloat16), CachedWeights)
    plain = open_weights(smollm2_path, torch.float32)
    assert isinstance(plain, Weights) and isinstance(open_weights(smollm2_path), Weights)
    plain.load("output_norm.weight", CPU, torch.float32)
    assert not (home / "torch").exists()


def test_a_damaged_copy_is_made_again(smollm2_path, home):
    CachedWeights(Weights(smollm2_path), torch.bfloat16).load(NAMES[0], CPU, torch.bfloat16)
    file = cache_file(smollm2_path, torch.bfloat16)
    with open(file, "r+b") as f:
        f.truncate(file.stat().st_size // 2)
    w = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    assert torch.equal(
        w.load(NAMES[1], CPU, torch.bfloat16),
        Weights(smollm2_path).load(NAMES[1], CPU, torch.bfloat16),
    )
    assert file.stat().st_size > 2 * 10**8  # whole again: 135M parameters of 2 bytes


def test_a_new_gguf_of_the_same_name_replaces_the_old_copy(smollm2_path, tmp_path, home):
    model = tmp_path / smollm2_path.name
    shutil.copyfile(smollm2_path, model)
    CachedWeights(Weights(model), torch.bfloat16).load(NAMES[0], CPU, torch.bfloat16)
    old = cache_file(model, torch.bfloat16)
    os.utime(model, ns=(old.stat().st_atime_ns, model.stat().st_mtime_ns + 10**9))
    CachedWeights(Weights(model), torch.bfloat16).load(NAMES[0], CPU, torch.bfloat16)
    assert not old.exists() and [p.name for p in (home / "torch").iterdir()] == [
        cache_file(model, torch.bfloat16).name
    ]


def test_no_room_to_keep_it_loads_anyway(smollm2_path, home, capsys):
    home.mkdir()
    (home / "torch").write_text("a file where the folder goes")
    w = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    assert torch.equal(
        w.load(NAMES[2], CPU, torch.bfloat16),
        Weights(smollm2_path).load(NAMES[2], CPU, torch.bfloat16),
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not be kept" in err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="reading onto a GPU needs one")
def test_cuda_the_kept_copy_reads_straight_onto_the_device(smollm2_path, home):
    """The kept file opened for the device: each tensor read from the mapped file to the GPU, the
    values the CPU reads."""
    CachedWeights(Weights(smollm2_path), torch.bfloat16).load(NAMES[0], CPU, torch.bfloat16)
    on_cpu = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    on_gpu = CachedWeights(Weights(smollm2_path), torch.bfloat16)
    cuda = torch.device("cuda")
    for n in NAMES:
        got = on_gpu.load(n, cuda, torch.bfloat16)
        assert got.device.type == "cuda" and torch.equal(
            got.cpu(), on_cpu.load(n, CPU, torch.bfloat16)
        )
