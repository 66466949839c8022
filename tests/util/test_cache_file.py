"""util/cache_file.read_cache: a cache read back counts as missing where it is missing or damaged,
and a damaged one is said once a process, naming the file and its first wrong field."""

from __future__ import annotations

from edgereason.util.cache_file import read_cache
from edgereason.util.schema import MapOf, Number

SCHEMA = MapOf(Number(above=0))


def test_a_missing_cache_is_none_and_says_nothing(tmp_path, capsys) -> None:
    assert read_cache(tmp_path / "none.json", SCHEMA, "measuring again") is None
    assert read_cache(tmp_path / "a-file" / "x.json", SCHEMA, "measuring again") is None
    assert capsys.readouterr().err == ""


def test_a_damaged_cache_is_none_said_once(tmp_path, capsys) -> None:
    path = tmp_path / "cache.json"
    path.write_text('{"a": 0}')
    assert read_cache(path, SCHEMA, "measuring again") is None
    assert read_cache(path, SCHEMA, "measuring again") is None
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f'edgereason: note: {path} is damaged (["a"] must be a number > 0, not 0); measuring again'
    )


def test_a_good_cache_is_its_value(tmp_path) -> None:
    path = tmp_path / "cache.json"
    path.write_text('{"a": 1.5}')
    assert read_cache(path, SCHEMA, "measuring again") == {"a": 1.5}
