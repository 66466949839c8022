"""Bench's comma-list flags (--policies, --beams, --strategy, --rate, --split): each value once,
checked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from edgereason.errors import ConfigError

T = TypeVar("T")


def comma_items(text: str, flag: str, allowed: Sequence[str] | None = None) -> list[str]:
    """The values of `flag`'s comma list, each once, and each among `allowed` where it is given.
    An empty value ("4,,8", "4,8,") is a mistake, refused: it was dropped without a word."""
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise ConfigError(f"{flag} needs at least one value")
    if "" in items:
        raise ConfigError(
            f"{flag} {text!r} has an empty value; separate its values by single commas"
        )
    if allowed is not None and (bad := [s for s in items if s not in allowed]):
        raise ConfigError(f"{flag} takes {', '.join(allowed)}; got {', '.join(bad)}")
    if twice := sorted({s for s in items if items.count(s) > 1}):
        # runs are labelled by these values: two alike would share a label in the tables, plots and
        # --compare
        raise ConfigError(
            f"{flag} names {', '.join(twice)} more than once; give each value once "
            "(--repeat N runs every configuration N times)"
        )
    return items


def comma_values(text: str, flag: str, parse: Callable[[str], T]) -> list[T]:
    """`comma_items` read as numbers, each number once: 0.5 and .5 would run one configuration
    twice, under one label."""
    items = comma_items(text, flag)
    values = [parse(s) for s in items]
    if alike := [s for s, v in zip(items, values) if values.count(v) > 1]:
        raise ConfigError(
            f"{flag} names one value twice ({' and '.join(alike)}); give each value once "
            "(--repeat N runs every configuration N times)"
        )
    return values


def beam_size(text: str) -> int:
    """One size of `--beams`' list."""
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--beams takes whole numbers, got {text!r}") from None
