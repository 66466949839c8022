"""The shipped LoRA head (qwen2.5-coder-1.5b-lora: rank 16 on the attention projections of
Qwen2.5-Coder-1.5B, alpha 32, so a scale of 2; q/k/v biases, tied embeddings, K-quants) on the torch
verifier against llama.cpp, where a pull has put the 1.5B in the model cache (the tests pull only
SmolLM2). In float32 on the CPU: 11 GB and 3 minutes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import edgereason
from edgereason import models
from edgereason.backends.llamacpp.model import load_model as load_llama
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.backends.torch.model import load_model
from edgereason.backends.torch.verifier import TorchVerifier
from edgereason.heads.value_head import load_head
from edgereason.protocols import ScoreRequest

QWEN = models.cache_path(models.REGISTRY["qwen2.5-coder-1.5b"])
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not QWEN.is_file(), reason="qwen2.5-coder-1.5b is not in the model cache"),
]

Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?"
)
GOOD = [
    "In April she sold 48 clips.\n\n",
    "In May she sold 48 / 2 = 24 clips.\n\n",
    "Altogether 48 + 24 = 72 clips. The answer is \\boxed{72}.",
]
BAD = GOOD[:1] + [
    "In May she sold 48 * 2 = 96 clips.\n\n",
    "Altogether 48 + 96 = 144. The answer is \\boxed{144}.",
]


def test_the_shipped_lora_head_scores_near_llamacpp():
    """Within 0.05 (measured 0.027: llama.cpp's activation rounding, which here scores the same
    first step 0.380 in one path and 0.392 in the other); the adapter moves these scores by up to
    0.47, so scoring without it (or at another scale) fails."""
    head = load_head(
        Path(edgereason.__file__).parent / "heads" / "qwen2.5-coder-1.5b-lora.safetensors"
    )
    requests = [
        ScoreRequest("a", Q, GOOD, [0, 1, 2], "root", 0),
        ScoreRequest("b", Q, BAD, [0, 1, 2], "root", 0),
    ]
    llama = LlamaVerifier(
        load_llama(str(QWEN)), prm_format("head"), 4096, head=head, flash_attn=False
    )
    try:
        want = [s for r in llama.score(requests) for s in r.scores]
    finally:
        llama.close()
    model = load_model(str(QWEN), "cpu")
    got = [
        s
        for r in TorchVerifier(model, prm_format("head"), 4096, head=head).score(requests)
        for s in r.scores
    ]
    plain = [
        s
        for r in TorchVerifier(
            model, prm_format("head"), 4096, head=replace(head, adapter=None)
        ).score(requests)
        for s in r.scores
    ]
    assert max(abs(a - b) for a, b in zip(got, want)) < 0.05
    assert max(abs(a - b) for a, b in zip(got, plain)) > 0.2
