"""`--budget` sizes."""

from __future__ import annotations

import pytest

from edgereason.errors import ConfigError
from edgereason.memory import parse_size
from edgereason.memory.size import format_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("24MiB", 24 << 20),
        ("1.5GiB", 3 << 29),
        ("512M", 512 << 20),
        ("512m", 512 << 20),
        ("2 KiB", 2048),
        ("1000", 1000),
        ("1000B", 1000),
        ("1GB", 10**9),
        ("3kb", 3000),
        (" 64MiB ", 64 << 20),
        (".5G", 1 << 29),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "MiB",
        "abc",
        "12XB",
        "-5M",
        "0",
        "0.0GiB",
        "1.2.3M",
        "1e9",
        "5 M iB",
        "9" * 400,
        "1" + "0" * 400 + "TB",
    ],
)  # past a float: was an OverflowError traceback
def test_parse_size_rejects(text):
    with pytest.raises(ConfigError):
        parse_size(text)


def test_format_size():
    assert format_size(24 << 20) == "24.0 MiB"
    assert format_size(3 << 29) == "1.5 GiB"
    assert format_size(100) == "100 B"
