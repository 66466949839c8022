"""Memory profiles read back at start-up: a damaged one (cut short, edited, of another version) is
as good as missing, and what is wrong with it is named (issue 62, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from damaged_files import WHOLE_FILE

from edgereason.errors import DamagedFileError
from edgereason.memory.profile_store import find_profile, profile_path, read_profile

REFERENCE = Path(__file__).parents[2] / "profiles"
KEY = ("cpu-x-1c", "a", "b-judge")


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    return tmp_path


def good() -> dict:
    return json.loads(next(REFERENCE.glob("*.json")).read_text())


def edited(change) -> bytes:
    profile = good()
    change(profile)
    return json.dumps(profile).encode()


@pytest.mark.parametrize(
    "content, message",
    [
        *WHOLE_FILE.values(),
        (edited(lambda p: p.pop("curves")), "curves is missing"),
        (edited(lambda p: p["curves"].pop("verifier")), "curves.verifier is missing"),
        (
            edited(lambda p: p["curves"]["generator"][2].__setitem__(1, 0)),
            "curves.generator[2][1] must be a number > 0, not 0",
        ),
        (
            edited(lambda p: p["curves"].__setitem__("generator", [])),
            "curves.generator must be a list of 1 or more, not a list of 0",
        ),
        (
            edited(lambda p: p["curves"]["generator"].__setitem__(0, None)),
            "curves.generator[0] must be a list of 2 (a whole number > 0, a number > 0), not null",
        ),
        (
            edited(lambda p: p.__setitem__("generator_kv_bytes", "12MiB")),
            'generator_kv_bytes must be a whole number > 0, not "12MiB"',
        ),
        (
            edited(lambda p: p.__setitem__("lv_threshold_tokens", None)),
            "lv_threshold_tokens must be a whole number > 0, not null",
        ),
        (
            edited(lambda p: p["curves"]["verifier"][0].__setitem__(1, float("nan"))),
            "curves.verifier[0][1] must be a number > 0, not NaN",
        ),
        (
            edited(lambda p: p.__setitem__("verifier_kv_bytes", float("inf"))),
            "verifier_kv_bytes must be a whole number > 0, not Infinity",
        ),
    ],
    ids=[
        *WHOLE_FILE,
        "no curves",
        "no verifier curve",
        "zero throughput",
        "empty curve",
        "null point",
        "string bytes",
        "null threshold",
        "NaN",
        "Infinity",
    ],  # fmt: skip
)
def test_a_damaged_profile_counts_as_missing_and_says_why(home, content, message):
    path = profile_path(*KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert find_profile(*KEY) is None
    with pytest.raises(DamagedFileError) as e:
        read_profile(path)
    assert str(e.value).startswith(f"{path}: ") and message in e.value.problem


def test_every_reference_profile_reads(home):
    for path in REFERENCE.glob("*.json"):
        assert read_profile(path)["curves"]["generator"]
