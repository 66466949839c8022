"""SmolLM2 read into the torch backend on the CPU (float32), once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def torch_smollm2(smollm2_path):
    from edgereason.backends.torch.model import load_model

    return load_model(str(smollm2_path), "cpu")
