"""Real weights: SmolLM2's Q4_1 GGUF loaded into torch through transformers (`gguf_file=`, dequantized to fp32)
judges the same GSM8K steps as the llama.cpp judge on the same file.

Tokens must be identical. Scores agree to 0.08 at most and 0.02 on average (measured: max 0.059, mean about
0.01 over 6 problems): llama.cpp multiplies the 4-bit weights with activations it quantizes to 8 bits on the CPU,
torch multiplies the dequantized weights with fp32 activations; the two-token softmax turns those small logit
differences into a few hundredths of probability near 0.5."""

from __future__ import annotations

import json

import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.backends.transformers import open_verifier
from edgereason.protocols import ScoreRequest

pytestmark = pytest.mark.slow  # reading the GGUF into torch takes about a minute on 2 cores


def problems(path, n: int = 6) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]
    return [(r["problem"], [s for s in r["solution"].split("\n") if s.strip()]) for r in rows]


def test_torch_judge_agrees_with_the_llamacpp_judge(smollm2, smollm2_path, gsm8k_path):
    torch_judge = open_verifier(smollm2_path, "judge", kv_tokens=4096, device="cpu")
    llama_judge = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096, flash_attn=False)
    diffs = []
    for i, (question, steps) in enumerate(problems(gsm8k_path)):
        req = ScoreRequest(f"q{i}", question, steps, list(range(len(steps))))
        ours, theirs = torch_judge.score([req])[0], llama_judge.score([req])[0]
        assert ours.new_tokens == theirs.new_tokens  # the GGUF's tokenizer, converted, tokenizes alike
        assert all(0.0 <= s <= 1.0 for s in ours.scores)
        diffs += [abs(a - b) for a, b in zip(ours.scores, theirs.scores)]
    llama_judge.close()
    assert max(diffs) <= 0.08 and sum(diffs) / len(diffs) <= 0.02, diffs
