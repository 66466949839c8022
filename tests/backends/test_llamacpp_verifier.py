"""The llama.cpp judge PRM: prefix-stable prompts and incremental scoring."""

from __future__ import annotations

import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS, TurnPrompt
from edgereason.protocols import ScoreRequest

Q = "Janet has 16 eggs and eats 3. How many are left?"
STEPS = ["Janet starts with 16 eggs.", "She eats 3, so 16 - 3 = 13.", "The answer is $\\boxed{13}$."]


@pytest.fixture()
def verifier(smollm2):
    v = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096)
    yield v
    v.close()


def test_turn_prompt_is_prefix_stable(smollm2):
    prompt = TurnPrompt(PRM_FORMATS["judge"], lambda m: smollm2.apply_chat_template(m, True))

    def text(steps):
        return prompt.head(Q) + "".join(prompt.segments(steps, 0))

    for k in range(1, len(STEPS)):
        assert text(STEPS[:k + 1]).startswith(text(STEPS[:k]))
    assert text(STEPS) == prompt.head(Q) + "".join(prompt.segments(STEPS[:1], 0)) + "".join(
        prompt.segments(STEPS, 1))
    whole = smollm2.apply_chat_template([{"role": "system", "content": PRM_FORMATS["judge"].system},
                                         {"role": "user", "content": f"{Q} {STEPS[0]}"}], True)
    assert text(STEPS[:1]) == whole  # the model's own chat template, exactly


def test_paths_of_one_question_share_its_head(smollm2, verifier):
    first = verifier.score([ScoreRequest(f"s{i}", Q, [f"Step {i}."], [0], "root", 0) for i in range(4)])
    head = len(smollm2.tokenize(verifier.prompt.head(Q), add_bos=smollm2.add_bos))
    assert all(r.new_tokens < 20 for r in first)  # each path paid for its step only
    assert verifier.stats.tokens == head + sum(r.new_tokens for r in first)
    verifier.check_integrity()


@pytest.mark.parametrize("flash_attn, tolerance", [(False, 1e-3), (True, 0.03)])
def test_incremental_scoring_equals_scoring_from_scratch(smollm2, flash_attn, tolerance):
    """Bit-exact without flash attention; with it (the default) the ubatch split moves a score by ~1e-2."""
    verifier = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096, flash_attn=flash_attn)
    incremental = []
    for k in range(len(STEPS)):
        prefix = f"p{k - 1}" if k else None
        res = verifier.score([ScoreRequest(f"p{k}", Q, STEPS[:k + 1], [k], prefix, k)])[0]
        incremental += res.scores
        if k:  # only the new step's tokens were evaluated
            assert res.new_tokens < 40
    fresh = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096, flash_attn=flash_attn)
    whole = fresh.score([ScoreRequest("whole", Q, STEPS, [0, 1, 2])])[0].scores
    fresh.close()
    assert all(0.0 <= s <= 1.0 for s in whole)
    assert incremental == pytest.approx(whole, abs=tolerance)
    verifier.check_integrity()
    verifier.close()


def test_lru_drops_held_paths_under_memory_pressure(smollm2):
    v = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=512)
    for i in range(12):  # each path is about 100 tokens: they cannot all be held
        v.score([ScoreRequest(f"k{i}", Q, STEPS[:1] + [f"Step variant {i}."], [1])])
    assert v.kv_used_tokens <= v.kv_capacity_tokens
    v.check_integrity()
    v.close()
