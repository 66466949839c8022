"""The decoder with 4-bit matrices (--torch-weights int4, int4_layers.py), on SmolLM2's real GGUF,
every layer matrix of which is Q4_1 (exact in int4): on the CPU in float32 the int4 kernel's product
is the dequantized matrix's to float32 rounding, so the whole pass, eager or compiled, gives the
bf16 (here float32) decoder's logits to about 1e-3 and the same greedy tokens; its weights take a
third of the bytes. On CUDA (the lease) tinygemm in the decode and prefill graphs is held to the
bf16 decoder's distance from the CPU's float32 pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_torch_decode_graphs import _decode_rows, decode_setup
from test_torch_prefill_graphs import _verifier_like_pass

from edgereason.backends.torch import int4_choice
from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.int4_layers import GROUPS, int4_bytes, is_int4
from edgereason.backends.torch.int4_linear import Int4Linear
from edgereason.backends.torch.model import TorchModel, load_model
from edgereason.backends.torch.runtime import TorchContext
from edgereason.errors import ConfigError

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="session")
def int4_smollm2(smollm2_path) -> TorchModel:
    return TorchModel(smollm2_path, torch.device("cpu"), "int4")


def test_every_4_bit_group_is_held_as_int4_and_the_rest_as_read(int4_smollm2, torch_smollm2):
    decoder = int4_smollm2.decoder
    assert decoder.weights_kind == "int4" and torch_smollm2.decoder.weights_kind == "bf16"
    for layer in decoder.layers:
        assert all(isinstance(getattr(layer, field), Int4Linear) for field in GROUPS)
        assert isinstance(layer.attn_norm, torch.Tensor)
    assert isinstance(decoder.embed, torch.Tensor)  # Q8_0: stays in the dtype
    weights = Weights(int4_smollm2.path)
    assert not is_int4(weights, ["token_embd.weight"])
    assert int4_bytes(weights, 4) == decoder.weights_bytes()
    # 538 MB in float32 -> 193 MB (a 4-bit matrix: 0.75 bytes a weight with float32 scales)
    assert decoder.weights_bytes() < 0.4 * torch_smollm2.decoder.weights_bytes()


def test_an_int4_pass_gives_the_dequantized_weights_logits(int4_smollm2, torch_smollm2, fusion):
    """Decode rows of three sequences and a verifier-like prefill, eager and (fusion) compiled: the
    int4 kernel's rounding alone apart from the float32 decoder, the same top token in every row."""
    got, want = [], []
    for model, out in ((int4_smollm2, got), (torch_smollm2, want)):
        ctx = TorchContext(model, 1024)
        out.append(_decode_rows(ctx, decode_setup(ctx, model), [216, 2068, 536]))
        out.append(_verifier_like_pass(TorchContext(model, 1024), model))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-3)  # a wrong group or orientation: 1+
        assert (g.argmax(-1) == w.argmax(-1)).all()


def test_the_switch_picks_the_loaded_weights(smollm2_path, monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "int4")
    assert load_model(str(smollm2_path), "cpu").decoder.weights_kind == "int4"
    monkeypatch.setenv(int4_choice.SWITCH, "bf16")
    assert load_model(str(smollm2_path), "cpu").decoder.weights_kind == "bf16"


def test_a_lora_cannot_merge_into_4_bit_weights(int4_smollm2):
    layer = int4_smollm2.decoder.layers[0]
    for part in ("wq", "w_up", "w_down"):
        with pytest.raises(ConfigError, match="use --torch-weights bf16"):
            layer.with_part(part, torch.zeros(1))


def test_a_hugging_face_folder_runs_its_own_weights(smollm2_hf):
    """A folder's matrices are not 4-bit: int4 asked of one loads it as it is."""
    from edgereason.backends.torch.model import TorchDecoder

    decoder = TorchDecoder(smollm2_hf, torch.device("cpu"), "int4")
    assert decoder.weights_kind == "bf16"
    assert isinstance(decoder.layers[0].wqkv, torch.Tensor)


@pytest.mark.skipif(not CUDA, reason="tinygemm needs CUDA")
def test_cuda_int4_graphs_are_as_near_float32_as_bf16(smollm2_path, torch_smollm2, monkeypatch):
    """On CUDA, uncompiled and compiled: int4 decode and prefill graphs (tinygemm recorded in them)
    as near the CPU's float32 pass as the bf16 decoder's graphs are, the same top tokens."""
    from edgereason.backends.torch import compiled_layers

    cpu = TorchContext(torch_smollm2, 2048)
    reference = (
        _decode_rows(cpu, decode_setup(cpu, torch_smollm2), [216, 2068, 536]),
        _verifier_like_pass(TorchContext(torch_smollm2, 2048), torch_smollm2),
    )
    bf16 = TorchModel(smollm2_path, torch.device("cuda"), "bf16")
    int4 = TorchModel(smollm2_path, torch.device("cuda"), "int4")
    assert isinstance(int4.decoder.layers[0].wqkv, Int4Linear)
    assert int4.decoder.weights_bytes() < 0.5 * bf16.decoder.weights_bytes()
    for switch in ("0", "1"):
        monkeypatch.setenv(compiled_layers.SWITCH, switch)
        far = {}
        for kind, model in (("bf16", bf16), ("int4", int4)):
            ctx = TorchContext(model, 2048)
            ctx.prefill_graphs.capture_at = 1
            got = (_decode_rows(ctx, decode_setup(ctx, model), [216, 2068, 536]),)
            got += (_verifier_like_pass(ctx, model),)
            assert ctx.decode_graphs.graphs and ctx.prefill_graphs.graphs
            far[kind] = max(float(np.abs(g - w).max()) for g, w in zip(got, reference))
            same_top = [(g.argmax(-1) == w.argmax(-1)).mean() for g, w in zip(got, reference)]
            assert min(same_top) >= 0.75, (kind, same_top)
        # bf16 was 0.45-0.55 from float32 on an H100; int4's scales and zeros round in bf16 too
        assert far["int4"] < max(1.0, 2 * far["bf16"]), far
