"""build_result reads everything from the finished Request (SmolLM2 on llama.cpp): its record
copies the request's figures, it does not share them."""

from __future__ import annotations

import pytest
from real_backends import open_pair

from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.finished import build_result
from edgereason.engine.loop import Engine
from edgereason.engine.policy import PRESETS


@pytest.fixture(scope="module")
def models(backend, smollm2_path):
    return open_pair(backend, smollm2_path, 4096)


def _config() -> SearchConfig:
    return SearchConfig(
        beams=2,
        width=2,
        max_steps=2,
        max_step_tokens=16,
        max_path_tokens=64,
        sampling=SamplingParams(seed=3),
    )


def test_the_record_is_the_requests_own(models) -> None:
    engine = Engine(*models, PRESETS["baseline"])
    req = engine.submit("What is 12 times 3?", _config(), request_id="q1")
    engine.run_until_done(check=True)
    result = build_result(req)
    assert (result.request_id, result.question) == ("q1", "What is 12 times 3?")
    assert (result.status, result.reason) == (req.status, req.reason) == ("done", req.result.reason)
    assert result.metrics is not req.metrics and result.metrics.wall_s > 0
    assert result.metrics.generated_tokens == req.metrics.generated_tokens > 0
    assert result.step_common_prefix == req.common_prefix
    assert result.step_common_prefix is not req.common_prefix
    assert [p.node_id for p in result.paths] == [p.node_id for p in req.result.paths]
    assert len(result.tree) == len(req.tree.nodes) - 1  # the root (the prompt) is not a step


def test_a_cancelled_request_keeps_its_reason(models) -> None:
    engine = Engine(*models, PRESETS["baseline"])
    req = engine.submit("Tom has 5 apples and buys 4.", _config())
    engine.step()
    engine.cancel(req.id, "stopped by the test")
    result = build_result(req)
    assert (result.status, result.reason) == ("cancelled", "stopped by the test")
    assert result.metrics.wall_s >= req.result.metrics.wall_s > 0
