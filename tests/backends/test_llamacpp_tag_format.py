"""Math-Shepherd's tag format on the llama.cpp verifier: question + " " + step 1 + " ки", then "\\n"
+ step k + " ки"; P("+") against P("-") at each tag, step by step equal to whole (no flash
attention: bit-exact)."""

from __future__ import annotations

import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS, prompt_for
from edgereason.prompts import unmark
from edgereason.protocols import ScoreRequest

Q = "Janet has 16 eggs and eats 3. How many are left?"
STEPS = [
    "Janet starts with 16 eggs.\n\n",
    "She eats 3, so 16 - 3 = 13.\n\n",
    "The answer is $\\boxed{13}$.",
]


def test_tag_prompt_text():
    prompt = prompt_for(PRM_FORMATS["math-shepherd"], render=None)
    text = prompt.head(Q) + "".join(prompt.segments(STEPS, 0))
    assert unmark(text) == Q + " " + "\n".join(s.strip() + " ки" for s in STEPS)


def test_math_shepherd_on_llamacpp_step_by_step_equals_whole(smollm2):
    fmt = PRM_FORMATS["math-shepherd"]
    whole = LlamaVerifier(smollm2, fmt, kv_tokens=2048, flash_attn=False)
    scores = whole.score([ScoreRequest("w", Q, STEPS, [0, 1, 2])])[0].scores
    whole.close()
    stepwise = LlamaVerifier(smollm2, fmt, kv_tokens=2048, flash_attn=False)
    incremental = []
    for k in range(len(STEPS)):
        req = ScoreRequest(f"p{k}", Q, STEPS[: k + 1], [k], f"p{k - 1}" if k else "root", k)
        incremental += stepwise.score([req])[0].scores
    stepwise.check_integrity()
    stepwise.close()
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert incremental == pytest.approx(scores, abs=1e-3)
