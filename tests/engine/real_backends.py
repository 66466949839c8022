"""The backends the engine's real-model tests run on: llama.cpp always; torch too where torch sees a
CUDA device (issue 47: the engine's tests on both backends where a GPU is present), or where
EDGEREASON_TEST_BACKENDS names it (`EDGEREASON_TEST_BACKENDS=llamacpp,torch`: torch in float32 on
the CPU, minutes)."""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.backends.prm_format import prm_format


def _torch_sees_cuda() -> bool:
    if find_spec("torch") is None or find_spec("gguf") is None:
        return False
    import torch

    return torch.cuda.is_available()


def engine_backends() -> list[str]:
    named = os.environ.get("EDGEREASON_TEST_BACKENDS")
    if named:
        return [b.strip() for b in named.split(",") if b.strip()]
    return ["llamacpp", "torch"] if _torch_sees_cuda() else ["llamacpp"]


def gpu_layers(backend: str) -> int:
    """torch on the GPU where there is one (it runs a model whole on one device); llama.cpp as its
    tests always ran, on the CPU."""
    return 999 if backend == "torch" and _torch_sees_cuda() else 0


def open_pair(backend: str, path: Path, kv_tokens: int, flash_attn: bool = True):
    """A SmolLM2 generator and judge verifier on `backend`, as a session opens them."""
    place = Placement(n_gpu_layers=gpu_layers(backend), flash_attn=flash_attn)
    judge = PRMSpec(path, "judge")
    return load_backend(backend).open_models(path, judge, (kv_tokens, kv_tokens), place)


def open_with_slots(backend: str, path: Path, kv_tokens: int, n_seq_max: int):
    """A generator limited to n_seq_max sequences, and a judge verifier."""
    if backend == "torch":
        from edgereason.backends.torch.generator import TorchGenerator
        from edgereason.backends.torch.model import load_model
        from edgereason.backends.torch.verifier import TorchVerifier

        model = load_model(str(path), "cuda" if gpu_layers(backend) else "cpu")
        return TorchGenerator(model, kv_tokens, n_seq_max=n_seq_max), TorchVerifier(
            model, prm_format("judge"), kv_tokens
        )
    from edgereason.backends.llamacpp import LlamaGenerator, LlamaVerifier, load_model

    model = load_model(str(path))
    return LlamaGenerator(model, kv_tokens, n_seq_max=n_seq_max), LlamaVerifier(
        model, prm_format("judge"), kv_tokens
    )
