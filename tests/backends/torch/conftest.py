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
    """SmolLM2 as a Hugging Face folder, made offline by transformers from the GGUF (dequantized, float32: the
    values the torch backend dequantizes the GGUF to), saved in shards with model.safetensors.index.json."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tmp_path_factory.mktemp("hf") / "SmolLM2-135M-Instruct"
    source = {"gguf_file": smollm2_path.name, "local_files_only": True}
    model = AutoModelForCausalLM.from_pretrained(smollm2_path.parent, dtype="float32", **source)
    model.hf_quantizer = None  # the weights are dequantized: save them as a plain float checkpoint
    del model.config.quantization_config
    model.save_pretrained(folder, max_shard_size="200MB")
    AutoTokenizer.from_pretrained(smollm2_path.parent, **source).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def torch_smollm2_hf(smollm2_hf):
    from edgereason.backends.torch.model import load_model

    return load_model(str(smollm2_hf), "cpu")
