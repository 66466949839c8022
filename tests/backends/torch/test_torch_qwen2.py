"""The qwen2 architecture on the torch backend (neox rotary pairs, q/k/v biases, tied embeddings,
K-quants): Qwen2.5-Coder-0.5B against llama.cpp, where a pull has put it in the model cache (the
tests pull only SmolLM2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgereason
from edgereason import models
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.model import load_model as load_llama
from edgereason.backends.llamacpp.runtime import KVContext
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.backends.torch.model import load_model
from edgereason.backends.torch.runtime import TorchContext
from edgereason.backends.torch.verifier import TorchVerifier
from edgereason.heads.value_head import load_head
from edgereason.prompts import solve_messages
from edgereason.protocols import ScoreRequest

QWEN = models.cache_path(models.REGISTRY["qwen2.5-coder-0.5b"])
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not QWEN.is_file(), reason="qwen2.5-coder-0.5b is not in the model cache"),
]

Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?"
)


def test_next_token_agrees_with_llamacpp_wherever_llamacpp_is_decisive():
    """llama.cpp's logits at every prompt position beside torch's: where llama.cpp's best token
    leads its second by more than its 8-bit activation rounding moves logits (up to ~0.3 here),
    torch picks the same token."""
    llama_model, torch_model = load_llama(str(QWEN)), load_model(str(QWEN), "cpu")
    prompt = llama_model.tokenize(
        llama_model.apply_chat_template(solve_messages(Q)), add_bos=llama_model.add_bos
    )
    outputs = [(i, i) for i in range(len(prompt))]
    rows: dict[int, np.ndarray] = {}
    ctx = KVContext(llama_model, 1024)
    try:
        ctx.decode(
            [DecodeItem(ctx.new_seq(), prompt, outputs)],
            lambda i, row: rows.__setitem__(i, row.copy()),
        )
    finally:
        ctx.close()
    mine_ctx = TorchContext(torch_model, 1024)
    _, logits = mine_ctx.forward([DecodeItem(mine_ctx.new_seq(), prompt, outputs)])
    decisive = [i for i in range(len(prompt)) if float(np.diff(np.sort(rows[i])[-2:])[0]) > 1.0]
    assert len(decisive) >= len(prompt) // 3
    assert [int(logits[i].argmax()) for i in decisive] == [int(rows[i].argmax()) for i in decisive]


def test_the_shipped_value_head_scores_near_llamacpp():
    head = load_head(Path(edgereason.__file__).parent / "heads" / "qwen2.5-coder-0.5b.safetensors")
    good = [
        "In April she sold 48 clips.\n\n",
        "In May she sold 48 / 2 = 24 clips.\n\n",
        "Altogether 48 + 24 = 72 clips. The answer is \\boxed{72}.",
    ]
    bad = good[:1] + [
        "In May she sold 48 * 2 = 96 clips.\n\n",
        "Altogether 48 + 96 = 144. The answer is \\boxed{144}.",
    ]
    requests = [
        ScoreRequest("a", Q, good, [0, 1, 2], "root", 0),
        ScoreRequest("b", Q, bad, [0, 1, 2], "root", 0),
    ]
    llama = LlamaVerifier(
        load_llama(str(QWEN)), prm_format("head"), 4096, head=head, flash_attn=False
    )
    try:
        want = [r.scores for r in llama.score(requests)]
    finally:
        llama.close()
    got = [
        r.scores
        for r in TorchVerifier(
            load_model(str(QWEN), "cpu"), prm_format("head"), 4096, head=head
        ).score(requests)
    ]
    deltas = [abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)]
    assert max(deltas) < 0.03  # measured 0.015: llama.cpp's activation rounding, as on SmolLM2
