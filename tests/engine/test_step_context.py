"""StepContext: built once by the engine, the very parts TreeGrower and Selector act through."""

from __future__ import annotations

import dataclasses

import pytest

from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from tests.fakes import FakeGenerator, FakeVerifier


def test_the_grower_and_the_selector_share_the_engines_parts() -> None:
    engine = Engine(FakeGenerator(), FakeVerifier(), parse_policy("edge"))
    ctx = engine.grower.ctx
    assert engine.selector.ctx is ctx
    assert (ctx.generator, ctx.kv, ctx.verification, ctx.policy, ctx.emit) == (
        engine.generator,
        engine.kv,
        engine.verification,
        engine.policy,
        engine.emit,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.policy = parse_policy("baseline")  # type: ignore[misc]
