"""Which memory profile and cached pass cost a session reads: only those measured on its own
backend."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edgereason.memory import verifier_id
from edgereason.memory.profile_store import write_profile
from edgereason.session import profile_choice
from edgereason.session.auto_policy import choice_for
from edgereason.session.profile_choice import device_id, pass_cost_key, profile_for
from edgereason.session.settings import ModelSettings

SETTINGS = ModelSettings(
    model="gen.gguf", prm="prm.gguf", prm_format="judge", n_gpu_layers=0, verbose=True
)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    return tmp_path


def _stored(lv_threshold: int) -> dict:
    """What start-up reads of a profile (the generator's curve gives `--policy auto` its pass
    cost)."""
    return {
        "generator_kv_bytes": 1 << 20,
        "verifier_kv_bytes": 1 << 20,
        "lv_threshold_tokens": lv_threshold,
        "curves": {"generator": [[1, 100.0], [8, 200.0]], "verifier": [[64, 300.0]]},
    }


def test_each_backend_finds_only_its_own_profile(home):
    key = (device_id(SETTINGS), "gen", verifier_id("prm.gguf", "judge"))
    write_profile(_stored(64), *key)  # a profile from before the backend was recorded: llama.cpp's
    assert profile_for(SETTINGS, "llamacpp").profile["lv_threshold_tokens"] == 64
    assert profile_for(SETTINGS, "torch").profile is None
    write_profile(_stored(128), *key, "torch")
    assert profile_for(SETTINGS, "torch").profile["lv_threshold_tokens"] == 128
    # beside it, not replaced
    assert profile_for(SETTINGS, "llamacpp").profile["lv_threshold_tokens"] == 64


def test_the_tip_says_how_to_profile_the_sessions_backend(home):
    tip = profile_for(SETTINGS, "torch").tip
    assert tip.text.endswith(
        "edgereason memory-profile --model gen.gguf --prm prm.gguf --backend torch"
    )
    tip = profile_for(SETTINGS, "llamacpp").tip
    assert tip.text.endswith("edgereason memory-profile --model gen.gguf --prm prm.gguf")


def test_a_missing_profile_is_tipped_until_the_tip_is_shown(home):
    """Once per device and model pair, remembered when the line is shown, not when it is made: a
    search that fails at its start never shows it."""
    quiet = replace(SETTINGS, verbose=False)
    assert "no memory profile" in profile_for(quiet, "llamacpp").tip.text
    tip = profile_for(quiet, "llamacpp").tip
    tip.said()
    assert profile_for(quiet, "llamacpp").tip is None
    assert profile_for(quiet, "torch").tip is not None  # another pair
    assert profile_for(SETTINGS, "llamacpp").tip is not None  # --verbose: every run


def test_a_found_profile_has_no_tip(home):
    key = (device_id(SETTINGS), "gen", verifier_id("prm.gguf", "judge"))
    write_profile(_stored(64), *key)
    assert profile_for(SETTINGS, "llamacpp").tip is None


def test_the_tip_on_a_gpu_profiles_the_gpu(home, monkeypatch):
    """memory-profile measures the CPU unless told: a GPU session's note says --device gpu, so that
    the profile it makes is the one the session looks up (the GPU's id is given: this machine has
    none)."""
    monkeypatch.setattr(profile_choice, "default_device_id", lambda kind: f"{kind}-H200")
    gpu = replace(SETTINGS, n_gpu_layers=999)
    assert profile_for(gpu, "torch").tip.text.endswith(
        "memory-profile --model gen.gguf --prm prm.gguf --backend torch --device gpu"
    )


def test_a_pass_cost_measured_on_one_backend_is_not_read_by_the_other(home):
    # 8 rows cost 1.1x and 4x one row
    cheap, dear = ((1, 100.0), (8, 700.0)), ((1, 100.0), (8, 200.0))
    llama, torch = pass_cost_key(SETTINGS, "llamacpp"), pass_cost_key(SETTINGS, "torch")
    assert choice_for(None, llama, lambda: cheap).preset == "edge"
    measured = choice_for(None, torch, lambda: dear)
    assert (measured.preset, measured.source) == ("baseline", "measured at start-up")
    for key, preset in ((llama, "edge"), (torch, "baseline")):
        cached = choice_for(None, key, lambda: pytest.fail("measured again"))
        assert (cached.preset, cached.source) == (preset, "cached measurement")


def test_a_damaged_profile_is_named_with_what_is_wrong(home):
    key = (device_id(SETTINGS), "gen", verifier_id("prm.gguf", "judge"))
    path = write_profile({**_stored(64), "lv_threshold_tokens": 0}, *key)
    looked = profile_for(SETTINGS, "llamacpp")
    assert looked.profile is None and looked.path == path
    err = looked.tip.text
    assert err.startswith(f"edgereason: the memory profile {path} is corrupt (")
    assert "lv_threshold_tokens must be a whole number > 0, not 0); using defaults." in err
