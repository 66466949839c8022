"""The `auto` policy: edge where a pass of 8 rows is cheap, baseline elsewhere, from this device's
pass cost; a damaged cache of it is measured again and rewritten (issue 62, item 3)."""

from __future__ import annotations

import json

import pytest
from damaged_files import WHOLE_FILE

from edgereason.engine.policy import PRESETS, parse_policy, with_switches
from edgereason.memory.curve import Curve
from edgereason.session.auto_policy import (
    CACHE_FILE,
    AutoChoice,
    choice_for,
    choose,
    cost_8,
    is_auto,
    resolve,
)
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
    # the preset as run, its lazy threshold the session's (no profile: the CPU's default)
    as_run = {**PRESETS[choice.preset].switches(), "lv_threshold": session.lv_threshold}
    assert engine.policy.switches() == as_run
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


KEY = "cpu-x/smollm2/threads=auto/gpu_layers=0"
POINTS = ((1, 100.0), (8, 200.0))  # a pass of 8 rows costs 4x one row


@pytest.mark.parametrize(
    "content, message",
    [
        *WHOLE_FILE.values(),
        (json.dumps({KEY: None}).encode(), f'["{KEY}"] must be an object, not null'),
        (json.dumps({KEY: []}).encode(), f'["{KEY}"] must be an object, not a list of 0'),
        (json.dumps({KEY: {"cost_8": "x"}}).encode(), f'["{KEY}"].cost_8 must be a number > 0'),
        (json.dumps({KEY: {"cost_8": 0}}).encode(), "cost_8 must be a number > 0, not 0"),
        (json.dumps({KEY: {"cost_8": float("nan")}}).encode(), "must be a number > 0, not NaN"),
        (json.dumps({KEY: {}}).encode(), f'["{KEY}"].cost_8 is missing'),
        (b'{"k": {"cost_8": Infinity}}', "must be a number > 0, not Infinity"),
    ],
    ids=[*WHOLE_FILE, "null", "list", "string", "zero", "NaN", "missing", "Infinity"],
)
def test_a_damaged_cache_is_said_once_measured_again_and_rewritten(
    tmp_path, monkeypatch, capsys, content, message
):
    """It crashed every `solve --policy auto` (null, a list, a string, nesting) until deleted by
    hand, or held NaN for good (baseline every time, never measured again)."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    path = tmp_path / CACHE_FILE
    path.write_bytes(content)
    choice = choice_for(None, KEY, lambda: POINTS)
    assert choice == AutoChoice("baseline", pytest.approx(4.0), "measured at start-up")
    note = capsys.readouterr().err.strip()
    assert note.startswith(f"edgereason: note: {path} is damaged (") and message in note
    assert note.endswith("; measuring the pass cost again") and "\n" not in note
    assert json.loads(path.read_text())[KEY]["cost_8"] == 4.0  # rewritten whole
    again = choice_for(None, KEY, lambda: pytest.fail("measured again"))
    assert again.source == "cached measurement"
    assert capsys.readouterr().err == ""


def test_a_session_measures_over_a_damaged_cache(smollm2_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    (tmp_path / CACHE_FILE).write_bytes(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    session = open_session(
        ModelSettings(model=str(smollm2_path), generator_kv_tokens=1024, verifier_kv_tokens=1024)
    )
    try:
        choice = session.auto_choice()
    finally:
        session.close()
    assert choice.source == "measured at start-up" and choice.cost_8 > 0
    assert (
        f"{tmp_path / CACHE_FILE} is damaged (nested too deep to read)" in capsys.readouterr().err
    )
    assert list(json.loads((tmp_path / CACHE_FILE).read_text()).values())[0]["cost_8"] > 0
