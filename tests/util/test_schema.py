"""The schema every file the program reads back is checked against, and its reader: one error that
names the file and the first wrong field, whatever the file holds (issue 62, item 3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from damaged_files import WHOLE_FILE

from edgereason.errors import ConfigError, DamagedFileError
from edgereason.util.schema import (
    ANY,
    FLAG,
    TEXT,
    Fields,
    ListOf,
    MapOf,
    Maybe,
    Number,
    OneOf,
    Text,
    Tuple,
    Wrong,
    read_json_file,
)

CURVE = ListOf(Tuple((Number(whole=True, above=0), Number(above=0))), least=1)
PROFILE = Fields(
    {"lv": Number(whole=True, above=0), "curves": Fields({"generator": CURVE})},
    {"note": Maybe(TEXT), "rate": OneOf((Text(pattern="inf", name='"inf"'), Number(above=0)))},
)
GOOD = {"lv": 64, "curves": {"generator": [[1, 40.5], [8, 90]]}}


def wrong(schema, value) -> str:
    with pytest.raises(Wrong) as e:
        schema.check(value, "")
    return str(e.value)


def test_a_value_that_fits_passes_and_unnamed_fields_are_not_checked():
    PROFILE.check({**GOOD, "newer": [None], "note": None, "rate": "inf"}, "")
    PROFILE.check({**GOOD, "rate": 0.5, "note": "x"}, "")
    MapOf(ANY).check({"a": [[[]]]}, "")


@pytest.mark.parametrize(
    "value, message",
    [
        ({"lv": 64}, "curves is missing"),
        ({**GOOD, "lv": None}, "lv must be a whole number > 0, not null"),
        ({**GOOD, "lv": 0}, "lv must be a whole number > 0, not 0"),
        ({**GOOD, "lv": 6.5}, "lv must be a whole number > 0, not 6.5"),
        ({**GOOD, "lv": True}, "lv must be a whole number > 0, not true"),
        ({**GOOD, "lv": "64"}, 'lv must be a whole number > 0, not "64"'),
        ({**GOOD, "curves": []}, "curves must be an object, not a list of 0"),
        ({**GOOD, "curves": {"generator": []}}, "curves.generator must be a list of 1 or more"),
        (
            {**GOOD, "curves": {"generator": [[1, 40.5], [8, 0]]}},
            "curves.generator[1][1] must be a number > 0, not 0",
        ),
        (
            {**GOOD, "curves": {"generator": [[1, 2, 3]]}},
            "curves.generator[0] must be a list of 2 (a whole number > 0, a number > 0), not a "
            "list of 3",
        ),
        (
            {**GOOD, "curves": {"generator": [[1, float("nan")]]}},
            "curves.generator[0][1] must be a number > 0, not NaN",
        ),
        (
            {**GOOD, "curves": {"generator": [[1, float("inf")]]}},
            "curves.generator[0][1] must be a number > 0, not Infinity",
        ),
        ({**GOOD, "lv": 10**400}, "lv must be a whole number > 0, not 1000000000"),
        ({**GOOD, "note": 5}, "note must be a string or null, not 5"),
        ({**GOOD, "rate": "fast"}, 'rate must be "inf" or a number > 0, not "fast"'),
        ({**GOOD, "rate": "x" * 100}, '"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'),
    ],
)
def test_the_first_wrong_field_is_named_with_what_it_must_be(value, message):
    assert message in wrong(PROFILE, value)


def test_bounds_flags_maps_and_patterns_read_as_they_are_checked():
    assert (
        wrong(Number(least=0, most=1), 1.5)
        == "the top level must be a number >= 0 and <= 1, not 1.5"
    )
    assert wrong(FLAG, 1) == "the top level must be true or false, not 1"
    assert wrong(MapOf(Fields({"x": TEXT})), {"a/b": {}}) == '["a/b"].x is missing'
    assert wrong(Text(pattern="[0-9a-f]{4}", name="a hash"), "abcx") == (
        'the top level must be a hash, not "abcx"'
    )


@pytest.mark.parametrize("content, message", WHOLE_FILE.values(), ids=WHOLE_FILE.keys())
def test_a_damaged_file_is_one_error_naming_the_file(tmp_path: Path, content: bytes, message):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(DamagedFileError, match=re.escape(f"{path}: ")) as e:
        read_json_file(path, PROFILE, "measure it again")
    assert message in e.value.problem and str(e.value).endswith("; measure it again")
    assert isinstance(e.value, ConfigError) and e.value.path == path


def test_a_field_of_a_file_is_named_after_the_file(tmp_path: Path):
    path = tmp_path / "x.json"
    path.write_text('{"lv": 64, "curves": {"generator": [[1, 2], [2, 3], [8, 0]]}}')
    with pytest.raises(DamagedFileError) as e:
        read_json_file(path, PROFILE)
    assert str(e.value) == f"{path}: curves.generator[2][1] must be a number > 0, not 0"


def test_a_missing_file_is_told_apart_and_a_folder_cannot_be_read(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "none.json", PROFILE)
    with pytest.raises(DamagedFileError, match="cannot be read"):
        read_json_file(tmp_path, PROFILE)
    (tmp_path / "good.json").write_text('{"lv": 64, "curves": {"generator": [[1, 2]]}}')
    assert read_json_file(tmp_path / "good.json", PROFILE)["lv"] == 64
