"""Hidden states of middle layers read through the verifier's features
(backends/llamacpp/layer_capture.py)."""

from __future__ import annotations

import llama_cpp.llama_cpp as L
import numpy as np
import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.llamacpp.layer_capture import LayerCapture
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.protocols import ScoreRequest

Q = "Janet has 16 eggs and eats 3. How many are left?"
STEPS = [
    "Janet starts with 16 eggs. " * 6,
    "She eats 3, so 16 - 3 = 13. " * 6,
    "The answer is $\\boxed{13}$.",
]
TOKENS = np.arange(100, 140)


def _features(model, requests: list[ScoreRequest], layers: list[int] | None) -> list[np.ndarray]:
    capture = (
        LayerCapture(model.n_embd, L.llama_model_n_layer(model.ptr), layers) if layers else None
    )
    verifier = LlamaVerifier(
        model, PRM_FORMATS["head"], kv_tokens=8192, flash_attn=False, capture=capture
    )
    try:
        return verifier.features(requests, TOKENS)
    finally:
        verifier.close()


def _hidden(rows: np.ndarray, n_layers: int) -> np.ndarray:
    return rows[:, len(TOKENS) :].reshape(len(rows), n_layers, -1)


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-row distance over the norm, for [..., n_embd] arrays."""
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(a, axis=-1)


def test_capture_reads_middle_layers_at_each_step_end_whatever_the_batch(smollm2):
    n_layer = L.llama_model_n_layer(smollm2.ptr)
    layers = [0, n_layer // 2, n_layer - 2]
    path = ScoreRequest("p", Q, STEPS, [0, 1, 2], "root", 0)
    others = [
        ScoreRequest(f"o{i}", f"{Q} ({i})", [f"{s} ({i})" for s in STEPS], [0, 1, 2], f"r{i}", 0)
        for i in range(6)
    ]
    alone = _features(smollm2, [path], layers)[0]
    # six other paths first: the path's steps land in other rows of a batch of three ubatches
    crowded = _features(smollm2, others + [path], layers)[-1]
    plain = _features(smollm2, [path], None)[0]

    assert alone.shape == (len(STEPS), len(TOKENS) + len(layers) * smollm2.n_embd)
    np.testing.assert_array_equal(alone[:, : len(TOKENS)], plain)  # reading layers changes no logit
    h, h_crowded = _hidden(alone, len(layers)), _hidden(crowded, len(layers))
    # llama.cpp's numbers move a little with the batch (~2% by the late layers of SmolLM2), far less
    # than from one step's end to the next at any layer: each row is its own step's
    same = _relative(h, h_crowded)
    assert same.max() < 0.05
    assert (same.max(axis=0) < 0.25 * _relative(h[:-1], h[1:]).min(axis=0)).all()
    assert _relative(h[:, 1], h[:, 0]).min() > 0.5 and _relative(h[:, 2], h[:, 1]).min() > 0.5


def test_the_last_layer_is_refused():
    with pytest.raises(ValueError, match="last"):
        LayerCapture(64, 30, [29])
