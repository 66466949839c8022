"""backends/path_verifier.py on the real SmolLM2 judge (llama.cpp): whole paths scored from scratch
(best-of-N's requests name no held prefix) tokenize their question's head once."""

from __future__ import annotations

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.protocols import ScoreRequest

Q = "Janet has 16 eggs and eats 3. How many are left?"
PATHS = [
    ["Janet starts with 16 eggs.", "16 - 3 = 13, so $\\boxed{13}$."],
    ["She eats 3 of 16.", "So $\\boxed{12}$."],
    ["16 eggs, 3 eaten.", "That leaves $\\boxed{13}$."],
]


def _whole_paths(question: str) -> list[ScoreRequest]:
    return [
        ScoreRequest(key=f"r/{i}/", question=question, steps=steps, need=[0, 1], prefix_key=None)
        for i, steps in enumerate(PATHS)
    ]


def test_paths_of_one_question_tokenize_its_head_once_and_score_as_before(smollm2):
    v = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096)
    head = v.prompt.head(Q)
    tokenized: list[str] = []
    tokens = v._tokens
    v._tokens = lambda text, first: tokenized.append(text) or tokens(text, first)  # type: ignore[method-assign]
    try:
        scored = v.score(_whole_paths(Q))
        again = v.score(_whole_paths(Q))  # the same paths again: the head is not tokenized again
    finally:
        v.close()
    assert tokenized.count(head) == 1
    uncached = LlamaVerifier(smollm2, PRM_FORMATS["judge"], kv_tokens=4096)
    uncached._head_tokens = lambda q: uncached._tokens(uncached.prompt.head(q), True)  # type: ignore[method-assign]
    try:
        expected = uncached.score(_whole_paths(Q))
    finally:
        uncached.close()
    assert [r.scores for r in scored] == [r.scores for r in expected]
    assert (
        [r.new_tokens for r in scored]
        == [r.new_tokens for r in again]
        == [r.new_tokens for r in expected]
    )
