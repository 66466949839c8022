"""The torch Verifier on real SmolLM2 weights (CPU), against the llama.cpp verifier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.backends.torch.model import TorchDecoder
from edgereason.backends.torch.verifier import TorchVerifier
from edgereason.errors import ConfigError, ModelError
from edgereason.heads.value_head import Backbone, ValueHead
from edgereason.protocols import ScoreRequest

Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips "
    "did Natalia sell altogether in April and May?"
)
GOOD = [
    "In April she sold 48 clips.",
    "In May she sold 48 / 2 = 24 clips.",
    "Altogether 48 + 24 = 72 clips.",
    "The answer is 72.",
]
BAD = ["In April she sold 48 clips.", "In May she sold 48 * 2 = 96 clips.", "Altogether 48 + 96 = 144."]


def _score_twice(v) -> list[list[float]]:
    """Two calls as a search makes them: first steps under a shared question head, then grown paths."""
    first = v.score(
        [ScoreRequest("a", Q, GOOD[:2], [0, 1], "root", 0), ScoreRequest("b", Q, BAD[:2], [0, 1], "root", 0)]
    )
    grown = v.score([ScoreRequest("a2", Q, GOOD, [2, 3], "a", 2), ScoreRequest("b2", Q, BAD, [2], "b", 2)])
    v.check_integrity()
    return [r.scores for r in first + grown]


@pytest.mark.parametrize("fmt", ["judge", "rlhflow"])
def test_scores_are_near_llamacpps(fmt, smollm2, torch_smollm2):
    """llama.cpp rounds activations to 8 bits, which moves SmolLM2's logits by up to ~0.7 (torch's are the
    dequantized weights' float32 logits); on these steps the scores differ by up to 0.035 (judge), 0.01
    (rlhflow), so the bound is 0.05. A prompt or readout mistake moves them by far more (a swapped Yes/No: ~0.5)."""
    llama = LlamaVerifier(smollm2, prm_format(fmt), 4096, flash_attn=False)
    try:
        want = _score_twice(llama)
    finally:
        llama.close()
    mine = TorchVerifier(torch_smollm2, prm_format(fmt), 4096)
    got = _score_twice(mine)
    deltas = [abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)]
    assert len(deltas) == 7 and max(deltas) < 0.05
    assert mine.kv_used_tokens == llama.kv_used_tokens  # the same cells held: the same prompts and reuse


def test_a_grown_path_scores_as_from_scratch_and_costs_only_its_new_steps(torch_smollm2):
    v = TorchVerifier(torch_smollm2, prm_format("judge"), 4096)
    _score_twice(v)
    reused = v.score([ScoreRequest("a3", Q, GOOD + ["So 72."], [3, 4], "a2", 4)])[0]
    fresh = TorchVerifier(torch_smollm2, prm_format("judge"), 4096)
    scratch = fresh.score([ScoreRequest("x", Q, GOOD + ["So 72."], [3, 4])])[0]
    assert reused.scores == pytest.approx(scratch.scores, abs=1e-3)  # matmuls of other shapes round otherwise
    assert reused.new_tokens < scratch.new_tokens / 3
    v.release("a")
    v.check_integrity()
    assert v.kv_used_tokens > 0  # b's path and the question head stay


def test_a_full_cache_drops_old_paths_and_rebuilds(torch_smollm2):
    v = TorchVerifier(torch_smollm2, prm_format("judge"), 300)
    _score_twice(v)
    v.score([ScoreRequest("c", Q + " Think.", GOOD[:3], [2], "root2", 0)])
    v.check_integrity()
    assert v.kv_used_tokens <= 300


def test_a_value_head_with_layers_is_refused_in_one_line(torch_smollm2):
    head = ValueHead(
        Backbone("smollm2", "x.gguf", "0" * 64),
        tokens=np.zeros(0, dtype=np.int32),
        mean=np.zeros(576, dtype=np.float32),
        std=np.ones(576, dtype=np.float32),
        w2=np.zeros((1, 576), dtype=np.float32),
        b2=np.zeros(1, dtype=np.float32),
        layers=(10,),
    )
    with pytest.raises(ConfigError, match="middle layers .* --backend llamacpp"):
        TorchVerifier(torch_smollm2, prm_format("head"), 1024, head=head)


def test_an_architecture_it_cannot_run_is_one_model_error(phi3_gguf):
    with pytest.raises(ModelError, match="phi3 model; the torch backend runs llama, qwen2: use --backend llamacpp"):
        TorchDecoder(phi3_gguf, torch.device("cpu"))
