"""Session.engine: the lazy-verification threshold has one source, the policy; the session fills a
policy's 0 with its own (the memory profile's, else the device's default)."""

from __future__ import annotations

from pathlib import Path

from edgereason.engine.loop import Engine
from edgereason.engine.policy import DEFAULT_LV_THRESHOLD, parse_policy
from edgereason.session.session import Session
from edgereason.session.settings import ModelSettings
from tests.fakes import FakeGenerator, FakeVerifier


def _session(lv_threshold: int) -> Session:
    return Session(
        ModelSettings(),
        FakeGenerator(),
        FakeVerifier(),
        Path("generator.gguf"),
        Path("prm.gguf"),
        lv_threshold=lv_threshold,
    )


def _threshold(engine: Engine) -> int:
    return engine.verification.queue.threshold_tokens


def test_a_policy_without_a_threshold_runs_the_sessions() -> None:
    engine = _session(64).engine(parse_policy("edge"))
    assert engine.policy.lv_threshold == _threshold(engine) == 64


def test_the_policys_own_threshold_wins() -> None:
    engine = _session(64).engine(parse_policy("edge:lv_threshold=128"))
    assert engine.policy.lv_threshold == _threshold(engine) == 128
    assert engine.policy.name == "edge:lv_threshold=128"


def test_an_engine_without_a_session_takes_the_cpus_default() -> None:
    engine = Engine(FakeGenerator(), FakeVerifier(), parse_policy("edge"))
    assert _threshold(engine) == DEFAULT_LV_THRESHOLD["cpu"] == 512
