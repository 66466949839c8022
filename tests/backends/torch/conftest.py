"""SmolLM2 read into the torch backend on the CPU (float32), once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def torch_smollm2(smollm2_path):
    from edgereason.backends.torch.model import load_model

    return load_model(str(smollm2_path), "cpu")


@pytest.fixture()
def phi3_gguf(tmp_path):
    """A GGUF of an architecture the torch backend does not run (metadata and one tensor)."""
    import gguf
    import numpy as np

    path = tmp_path / "phi.gguf"
    writer = gguf.GGUFWriter(str(path), "phi3")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
