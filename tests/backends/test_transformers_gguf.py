"""Real weights: SmolLM2's Q4_1 GGUF loaded into torch through transformers (`gguf_file=`,
dequantized to fp32) judges the same GSM8K steps as the llama.cpp judge on the same file.

Tokens must be identical. Scores agree to 0.08 at most and 0.02 on average (measured: max 0.059,
mean about 0.01 over 6 problems): llama.cpp multiplies the 4-bit weights with activations it
quantizes to 8 bits on the CPU, torch multiplies the dequantized weights with fp32 activations; the
two-token softmax turns those small logit differences into a few hundredths of probability near 0.5.
A value head read from the same file agrees alike. On torch, the six paths scored in one batched
(padded) pass equal them scored one by one to 1e-4."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.backends.transformers import open_verifier
from edgereason.heads.backbone import feature_tokens, file_sha256
from edgereason.heads.value_head import Backbone, ValueHead, load_head, save_head
from edgereason.protocols import ScoreRequest

pytestmark = pytest.mark.slow  # reading the GGUF into torch takes about a minute on 2 cores


def problems(path, n: int = 6) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]
    return [(r["problem"], [s for s in r["solution"].split("\n") if s.strip()]) for r in rows]


def test_torch_judge_agrees_with_the_llamacpp_judge(smollm2, smollm2_path, gsm8k_path):
    torch_judge = open_verifier(smollm2_path, "judge", kv_tokens=4096, device="cpu")
    llama_judge = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096, flash_attn=False)
    diffs, alone, reqs = [], [], []
    for i, (question, steps) in enumerate(problems(gsm8k_path)):
        req = ScoreRequest(f"q{i}", question, steps, list(range(len(steps))))
        ours, theirs = torch_judge.score([req])[0], llama_judge.score([req])[0]
        # the GGUF's tokenizer, converted, tokenizes alike
        assert ours.new_tokens == theirs.new_tokens
        assert all(0.0 <= s <= 1.0 for s in ours.scores)
        diffs += [abs(a - b) for a, b in zip(ours.scores, theirs.scores)]
        alone.append(ours.scores)
        reqs.append(req._replace(key=f"batched{i}"))
    llama_judge.close()
    assert max(diffs) <= 0.08 and sum(diffs) / len(diffs) <= 0.02, diffs
    # all six paths (different lengths, so padded) in one batched pass: the real weights' scores
    # within 1e-4
    assert [r.scores for r in torch_judge.score(reqs)] == [
        pytest.approx(s, abs=1e-4) for s in alone
    ]


def smollm2_head(model, path) -> ValueHead:
    """A random linear value head on SmolLM2's logit features (the trained heads' layout; none ships
    for SmolLM2), scaled so its pre-sigmoid values spread about 1 around 0: scores that move from
    step to step, not saturated."""
    rng = np.random.default_rng(0)
    tokens = feature_tokens(model.n_vocab, model.n_embd, model.control_ids)
    k = len(tokens)
    w2 = (rng.normal(size=(1, k)) / np.sqrt(k)).astype(np.float32)
    return ValueHead(
        Backbone("smollm2-135m", path.name, file_sha256(path)),
        tokens.astype(np.int64),
        np.zeros(k, np.float32),
        np.full(k, 4.0, np.float32),
        w2,
        np.zeros(1, np.float32),
    )


def test_a_value_head_scores_alike_on_torch_and_llamacpp(
    smollm2, smollm2_path, gsm8k_path, tmp_path
):
    """One head file, two backends: the same head read from the same GGUF on llama.cpp and on torch.

    Measured: max 0.014, mean 0.006 over the steps of 4 problems (scores 0.05 to 0.66); asserted:
    max 0.06, mean 0.02 (the Q4 x int8 against fp32 difference of the judge test above, through a
    head instead of a softmax)."""
    save_head(smollm2_head(smollm2, smollm2_path), tmp_path / "smol-head")
    head = load_head(tmp_path / "smol-head.safetensors")  # through the file, as --prm-head reads it
    torch_head = open_verifier(smollm2_path, "head", kv_tokens=4096, device="cpu", head=head)
    llama_head = LlamaVerifier(
        smollm2, PRM_FORMATS["head"], kv_tokens=4096, flash_attn=False, head=head
    )
    ours, theirs = [], []
    for i, (question, steps) in enumerate(problems(gsm8k_path, 4)):
        req = ScoreRequest(f"q{i}", question, steps, list(range(len(steps))))
        a, b = torch_head.score([req])[0], llama_head.score([req])[0]
        assert a.new_tokens == b.new_tokens
        ours += a.scores
        theirs += b.scores
    llama_head.close()
    diffs = [abs(a - b) for a, b in zip(ours, theirs)]
    assert max(ours) - min(ours) > 0.1  # the scores move: agreement is not two constants agreeing
    assert max(diffs) <= 0.06 and sum(diffs) / len(diffs) <= 0.02, diffs


def test_a_head_that_reads_middle_layers_is_refused_on_torch_before_the_weights_load(
    smollm2, smollm2_path
):
    """Only the llama.cpp verifier captures middle layers: on torch such a head would read the wrong
    rows."""
    from dataclasses import replace

    from edgereason.errors import ConfigError

    head = smollm2_head(smollm2, smollm2_path)
    d = smollm2.n_embd
    layered = replace(
        head,
        tokens=np.zeros(0, np.int64),
        mean=np.zeros(d, np.float32),
        std=np.ones(d, np.float32),
        w2=np.zeros((1, d), np.float32),
        layers=(6,),
    )
    with pytest.raises(
        ConfigError, match="middle layers \\(6\\), which only the llama.cpp backend reads"
    ):
        open_verifier(smollm2_path, "head", kv_tokens=4096, device="cpu", head=layered)
