"""Human byte sizes for `--kv-budget`: "24MiB", "1.5GiB", "512M", "1000000" (bytes)."""

from __future__ import annotations

import math
import re

from edgereason.errors import ConfigError

# Decimal (kB, MB) and binary (KiB, MiB) units; a bare letter (K, M, G, T) is binary, as in most
# tools' flags.
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "kb": 10**3,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 10**6,
    "g": 1 << 30,
    "gib": 1 << 30,
    "gb": 10**9,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": 10**12,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*")
# How each unit is written back to the user (a bare letter is binary, see above).
_LABELS = {
    "": "B",
    "b": "B",
    "k": "KiB",
    "kib": "KiB",
    "kb": "kB",
    "m": "MiB",
    "mib": "MiB",
    "mb": "MB",
    "g": "GiB",
    "gib": "GiB",
    "gb": "GB",
    "t": "TiB",
    "tib": "TiB",
    "tb": "TB",
}


def parse_size(text: str) -> int:
    """Bytes in `text`; ConfigError (a one-line CLI error) on anything that is not a positive
    size."""
    match = _SIZE.fullmatch(text)
    unit = match and _UNITS.get(match.group(2).lower())
    if not match or unit is None:
        raise ConfigError(f"not a size: {text!r}; write e.g. 24MiB, 1.5GiB or 512M")
    value = float(match.group(1)) * unit
    if math.isinf(value):  # over 308 digits: int() of it would be an OverflowError traceback
        raise ConfigError(f"size {text[:20]!r}... is too large; write e.g. 24MiB, 1.5GiB or 512M")
    size = int(value)
    if size <= 0:
        raise ConfigError(f"size must be positive, got {text!r}")
    return size


def size_unit(text: str) -> str:
    """The unit a size (as parse_size takes it) is written in, spelled for format_size_in: "KiB",
    "MB", "B"."""
    match = _SIZE.fullmatch(text)
    label = match and _LABELS.get(match.group(2).lower())
    if not label:
        raise ConfigError(f"not a size: {text!r}; write e.g. 24MiB, 1.5GiB or 512M")
    return label


def format_size_in(n_bytes: int, unit: str) -> str:
    """`n_bytes` in `unit` (a size_unit label), rounded up to a tenth so a minimum shown this way
    suffices, without a space so it can be passed back as a flag: "1KiB", "11.3MiB", "6000000B"."""
    scale = _UNITS[unit.lower()]
    value = math.ceil(n_bytes * 10 / scale) / 10 if scale > 1 else n_bytes
    return f"{value:.1f}".removesuffix(".0") + unit


def format_size(n_bytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{int(n_bytes)} B"
