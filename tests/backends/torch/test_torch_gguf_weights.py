"""A GGUF's tensors as the torch backend reads them (gguf_weights.py over util/gguf_layout.py): the
same values gguf-py's full reader gives, without building the vocabulary's arrays; a file cut short
is one error."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch

from edgereason.backends.torch import gguf_weights
from edgereason.backends.torch.gguf_weights import Weights
from edgereason.errors import ModelError
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings


def test_every_kind_of_tensor_is_the_one_gguf_py_reads(smollm2_path):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    weights, reader = Weights(smollm2_path), GGUFReader(str(smollm2_path))
    assert sorted(weights.tensors) == sorted(t.name for t in reader.tensors)
    assert weights.n_elements() == sum(int(t.n_elements) for t in reader.tensors)
    # the embedding, a layer's quantized and float tensors, the last norm
    names = [
        t.name
        for t in reader.tensors
        if not t.name.startswith("blk.") or t.name.startswith("blk.7.")
    ]
    kinds = set()
    for t in (t for t in reader.tensors if t.name in names):
        got = weights.load(t.name, torch.device("cpu"), torch.float32).numpy()
        want = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(got.shape)
        np.testing.assert_array_equal(got, want, err_msg=t.name)
        kinds.add(t.tensor_type.name)
    assert {"F32", "Q4_1"} <= kinds
    assert (
        weights.meta("general.architecture") == "llama"
        and weights.meta("tokenizer.ggml.tokens") is True
    )
    assert weights.config().n_vocab == 49152  # the embedding's rows


def test_a_file_cut_short_is_one_model_error(tmp_path, smollm2_path):
    cut = tmp_path / "cut.gguf"
    with smollm2_path.open("rb") as f:
        cut.write_bytes(f.read(3_000_000))  # the header and a little of the tensor data
    with pytest.raises(
        ModelError, match=r"cut.gguf: the file ends at 3,000,000 bytes .* cut short; fetch it"
    ):
        Weights(cut)


def test_a_session_reads_the_gguf_layout_once(tmp_path, smollm2_path, monkeypatch):
    """The model's size and KV bytes (weights_table) and its weights (load_model) come from one read
    of the header: each read walks it past the vocabulary's arrays, 0.5-1 s on a large model."""
    gguf = tmp_path / "model.gguf"  # a path no earlier test opened: nothing of it is cached
    try:
        os.link(smollm2_path, gguf)
    except OSError:  # another file system
        shutil.copyfile(smollm2_path, gguf)
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    reads = []
    read_layout = gguf_weights.read_layout
    monkeypatch.setattr(
        gguf_weights, "read_layout", lambda path: reads.append(path) or read_layout(path)
    )
    session = open_session(
        ModelSettings(model=str(gguf), backend="torch", n_gpu_layers=0, kv_budget_bytes=24 << 20)
    )
    try:
        assert session.backend == "torch"
    finally:
        session.close()
    assert reads == [gguf.resolve()]
