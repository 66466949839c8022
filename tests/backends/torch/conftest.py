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


@pytest.fixture(scope="session")
def smollm2_hf(smollm2_path, tmp_path_factory):
    """SmolLM2 as a Hugging Face folder, made offline from the GGUF by `models export`'s conversion
    (dequantized, float32: the values the torch backend dequantizes the GGUF to), saved in shards
    with model.safetensors.index.json."""
    from edgereason.backends.transformers.export import write_hf_folder

    folder = tmp_path_factory.mktemp("hf") / "SmolLM2-135M-Instruct"
    folder.mkdir()
    write_hf_folder(smollm2_path, folder, "float32", max_shard_size="200MB")
    return folder


@pytest.fixture(scope="session")
def torch_smollm2_hf(smollm2_hf):
    from edgereason.backends.torch.model import load_model

    return load_model(str(smollm2_hf), "cpu")


@pytest.fixture()
def float32_kv(monkeypatch):
    """A float32 KV cache: compiled kernels round differently before an f16 cache, whose rounding
    would hide their own difference (about 3e-5 on SmolLM2's logits) behind its own (up to 1e-2)."""
    import torch

    from edgereason.backends.torch import runtime

    monkeypatch.setattr(runtime, "kv_dtype", lambda device: torch.float32)


@pytest.fixture(params=["uncompiled", "compiled"])
def fusion(request, monkeypatch):
    """The graphs' bodies as recorded, and with the decoder's layers compiled (compiled_layers.py:
    inductor's C++ kernels on the CPU, Triton's on CUDA), both over a float32 KV cache (float32_kv):
    a padded shape rounds apart from the eager pass's by about 1e-5 there, against up to 6e-3 before
    an f16 cache (CI saw 0.0061 over 5e-3)."""
    from edgereason.backends.torch import compiled_layers

    monkeypatch.setenv(compiled_layers.SWITCH, "1" if request.param == "compiled" else "0")
    request.getfixturevalue("float32_kv")
    return request.param
