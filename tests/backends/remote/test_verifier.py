"""The served PRM: judge scores from the next token's logprobs, as the local llama.cpp verifier reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.backends.remote import Endpoint, open_verifier
from edgereason.errors import ConfigError
from edgereason.protocols import ScoreRequest

from remote_server import LocalServer

STEPS = ["12 * 7 = 84.", "84 - 5 = 79.", "The answer is \\boxed{79}."]


@pytest.mark.slow
def test_judge_scores_match_the_local_verifier(server: LocalServer, smollm2_path: Path, smollm2) -> None:
    remote = open_verifier(smollm2_path, "judge", Endpoint(server.url))
    try:
        got = remote.score([ScoreRequest("r/1", "What is 12 * 7 - 5?", STEPS, [0, 1, 2]),
                            ScoreRequest("r/2", "What is 2 + 2?", ["2 + 2 = 5."], [0])])
        assert [len(r.scores) for r in got] == [3, 1]
        # one request per step score, all in one round; "What is 2 + 2?" has neither Yes nor No in its top 20 (SmolLM2
        # cannot judge), so a second round reads them from the echoed prompt
        first, echoed = remote.client.stats.per_batch
        assert first == 4 and echoed >= 2
    finally:
        remote.close()
    local = LlamaVerifier(smollm2, prm_format("judge"), 2048)
    want = local.score([ScoreRequest("r/1", "What is 12 * 7 - 5?", STEPS, [0, 1, 2]),
                        ScoreRequest("r/2", "What is 2 + 2?", ["2 + 2 = 5."], [0])])
    local.close()
    for g, w in zip(got, want):
        # the same prompt and model; numerics differ (SmolLM2 Q4_1: flash attention alone moves a score by 0.03,
        # the server runs without it, on other batch shapes)
        assert g.scores == pytest.approx(w.scores, abs=0.1)


def test_the_value_head_cannot_be_served(smollm2_path: Path) -> None:
    with pytest.raises(ConfigError, match="head reads thousands of logits"):
        open_verifier(smollm2_path, "head", Endpoint("http://127.0.0.1:1"))
