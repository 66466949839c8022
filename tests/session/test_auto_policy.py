"""The `auto` policy: edge where a pass of 8 rows is cheap, baseline elsewhere, from this device's
pass cost."""

from __future__ import annotations

import json

import pytest

from edgereason.engine.policy import PRESETS, parse_policy, with_switches
from edgereason.memory.curve import Curve
from edgereason.session.auto_policy import CACHE_FILE, AutoChoice, choose, cost_8, is_auto, resolve
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings


def test_the_threshold_splits_the_measured_devices():
    assert choose(1.6, "h200").preset == "edge"  # an H200 with SmolLM2
    assert choose(3.8, "xeon").preset == "baseline"  # 16 Xeon cores
    assert choose(4.0, "epyc").preset == "baseline"  # 2 EPYC cores


def test_cost_8_is_the_pass_time_ratio():
    # 100 tok/s at 1 row (10 ms a pass), 200 tok/s at 8 rows (40 ms a pass): 4x
    assert cost_8(Curve(((1, 100.0), (4, 150.0), (8, 200.0)))) == pytest.approx(4.0)


def test_auto_resolves_to_the_preset_with_its_overrides():
    policy = with_switches(parse_policy("auto:order=fifo"), {"lv_max_defer": 3})
    assert is_auto(policy) and not is_auto(PRESETS["edge"])
    edge = resolve(policy, AutoChoice("edge", 1.6, "test"))
    assert edge.name == policy.name
    assert edge.switches() == {**PRESETS["edge"].switches(), "order": "fifo", "lv_max_defer": 3}
    assert resolve(policy, AutoChoice("baseline", 4.0, "test")).switches() == {
        **PRESETS["baseline"].switches(),
        "order": "fifo",
        "lv_max_defer": 3,
    }


def test_a_session_measures_once_then_reads_its_cache(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))  # no profile, no cache
    settings = ModelSettings(
        model=str(smollm2_path), generator_kv_tokens=1024, verifier_kv_tokens=1024
    )
    session = open_session(settings)
    try:
        choice = session.auto_choice()
        engine = session.engine(parse_policy("auto"))
    finally:
        session.close()
    assert choice.source == "measured at start-up" and choice.cost_8 > 0
    assert engine.policy.switches() == PRESETS[choice.preset].switches()
    cached = json.loads((tmp_path / CACHE_FILE).read_text())
    assert [v["cost_8"] for v in cached.values()] == [round(choice.cost_8, 3)]
    again = open_session(settings)
    try:
        assert again.auto_choice() == AutoChoice(
            choice.preset, round(choice.cost_8, 3), "cached measurement"
        )
    finally:
        again.close()


def test_a_memory_profile_decides_without_measuring(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    session = open_session(
        ModelSettings(model=str(smollm2_path), generator_kv_tokens=1024, verifier_kv_tokens=1024)
    )
    try:
        # 8 rows = 1.6x one row
        session.profile = {"curves": {"generator": [[1, 800.0], [8, 4000.0]]}}
        assert session.auto_choice() == AutoChoice("edge", pytest.approx(1.6), "memory profile")
    finally:
        session.close()
    assert not (tmp_path / CACHE_FILE).exists()
