"""The files this program wrote earlier and reads back (caches and profiles under $EDGEREASON_HOME,
bench results, rollouts, chat history, value-head metadata), read through one reader that checks
them against a small declarative schema. A crash may have cut such a file short, a hand may have
edited it, another version may have written it: reading it gives its value, or DamagedFileError
naming the file and its first wrong field ("profiles/x.json: curves.generator[2][1] must be a number
> 0, not 0"), never a KeyError or a TypeError deep in the code that uses it.

A schema is built of: Number (bounds, whole numbers), Text (TEXT: any string; or one a pattern
matches), FLAG (true or false), Maybe (or null), OneOf, ListOf, Tuple (a list of fixed length, such
as a pair), Fields (an object's required and optional fields; fields it does not name are not
checked, as a newer version may add some), MapOf (an object of any keys) and ANY (not checked)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from edgereason.errors import DamagedFileError

SHOWN_CHARS = 40  # the most of a wrong value quoted in a message


class Wrong(ValueError):
    """The first thing wrong with a value, as a phrase ("curves.generator must be a list, not
    null"), and the field it names (`where`)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class Schema(Protocol):
    def describe(self) -> str: ...

    def check(self, value: object, where: str) -> None:
        """Wrong where `value` (at `where`, a field path; "" for the top level) does not fit."""


def _must(where: str, schema: Schema, value: object) -> Wrong:
    return Wrong(
        f"{where or 'the top level'} must be {schema.describe()}, not {_shown(value)}", where
    )


def _shown(value: object) -> str:
    """A wrong value as a message quotes it: scalars as JSON spells them (clipped), containers by
    kind (they may be nested past any printing)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = json.dumps(value)  # NaN and Infinity as JSON's readers spell them
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _plain(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


@dataclass(frozen=True)
class Number:
    """A JSON number (not true or false), finite, within the bounds given."""

    above: float | None = None  # strictly greater
    least: float | None = None
    most: float | None = None
    whole: bool = False

    def describe(self) -> str:
        bounds = [
            f"{sign} {_plain(bound)}"
            for sign, bound in ((">", self.above), (">=", self.least), ("<=", self.most))
            if bound is not None
        ]
        return ("a whole number" if self.whole else "a number") + "".join(
            f" {b}" if i == 0 else f" and {b}" for i, b in enumerate(bounds)
        )

    def check(self, value: object, where: str) -> None:
        if not self._fits(value):
            raise _must(where, self, value)

    def _fits(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        # a comparison, not math.isfinite: that cannot take an integer of 400 digits
        if not -sys.float_info.max <= value <= sys.float_info.max:  # NaN fails too
            return False
        return (
            (not self.whole or isinstance(value, int))
            and (self.above is None or value > self.above)
            and (self.least is None or value >= self.least)
            and (self.most is None or value <= self.most)
        )


@dataclass(frozen=True)
class Text:
    """A string; with `pattern`, one the regular expression matches whole (`name` says what)."""

    pattern: str | None = None
    name: str = "a string"

    def describe(self) -> str:
        return self.name

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, str) or (
            self.pattern is not None and re.fullmatch(self.pattern, value) is None
        ):
            raise _must(where, self, value)


class _Flag:
    def describe(self) -> str:
        return "true or false"

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, bool):
            raise _must(where, self, value)


TEXT = Text()
FLAG = _Flag()


class _Any:
    def describe(self) -> str:
        return "anything"

    def check(self, value: object, where: str) -> None:
        pass


ANY = _Any()


@dataclass(frozen=True)
class Maybe:
    """`of`, or null."""

    of: Schema

    def describe(self) -> str:
        return f"{self.of.describe()} or null"

    def check(self, value: object, where: str) -> None:
        if value is None:
            return
        try:
            self.of.check(value, where)
        except Wrong as e:
            if e.where != where:  # a field inside the value is wrong
                raise
            raise _must(where, self, value) from None  # the value itself: it may be null too


@dataclass(frozen=True)
class OneOf:
    """Whichever of `options` fits (each a scalar schema: the message names them all)."""

    options: tuple[Schema, ...]

    def describe(self) -> str:
        return " or ".join(option.describe() for option in self.options)

    def check(self, value: object, where: str) -> None:
        for option in self.options:
            try:
                option.check(value, where)
                return
            except Wrong:
                continue
        raise _must(where, self, value)


@dataclass(frozen=True)
class ListOf:
    """A list of `least` or more items, each fitting `item`."""

    item: Schema
    least: int = 0

    def describe(self) -> str:
        return "a list" if not self.least else f"a list of {self.least} or more"

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, list) or len(value) < self.least:
            raise _must(where, self, value)
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]")


@dataclass(frozen=True)
class Tuple:
    """A list of exactly len(items) values, the i-th fitting items[i] (a pair: two)."""

    items: tuple[Schema, ...]

    def describe(self) -> str:
        return f"a list of {len(self.items)} ({', '.join(s.describe() for s in self.items)})"

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, list) or len(value) != len(self.items):
            raise _must(where, self, value)
        for i, (item, schema) in enumerate(zip(value, self.items)):
            schema.check(item, f"{where}[{i}]")


@dataclass(frozen=True)
class Fields:
    """An object with every `required` field and any of the `optional` ones, each fitting its
    schema."""

    required: Mapping[str, Schema]
    optional: Mapping[str, Schema] = field(default_factory=dict)

    def describe(self) -> str:
        return "an object"

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise _must(where, self, value)
        for name, schema in self.required.items():
            if name not in value:
                raise Wrong(f"{_field(where, name)} is missing", _field(where, name))
            schema.check(value[name], _field(where, name))
        for name, schema in self.optional.items():
            if name in value:
                schema.check(value[name], _field(where, name))


def _field(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


@dataclass(frozen=True)
class MapOf:
    """An object of any keys, each value fitting `value`."""

    value: Schema

    def describe(self) -> str:
        return "an object"

    def check(self, value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise _must(where, self, value)
        for key, item in value.items():
            self.value.check(item, f"{where}[{json.dumps(key)}]")


def parse_json(data: bytes) -> object:
    """The JSON value of a file's bytes; Wrong where they are not UTF-8, not whole JSON, or nested
    past what Python reads. NaN and Infinity are read as floats: a Number refuses them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Wrong(f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise Wrong("nested too deep to read") from None
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}"
        raise Wrong(f"not whole JSON ({e.msg} at {where}: cut short or edited)") from None
    except ValueError as e:  # an integer of over 4,300 digits
        raise Wrong(f"not JSON this program reads ({e})") from None


def read_json_file(path: Path, schema: Schema, todo: str = "") -> object:
    """The file's value, checked against `schema`. DamagedFileError (the file, what is wrong, then
    `todo`: what to do about it) for any file that cannot be read or does not fit; a missing file
    is FileNotFoundError, which a caller tells apart (a cache not made yet)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise DamagedFileError(path, f"cannot be read ({e.strerror or e})", todo) from None
    try:
        value = parse_json(data)
        schema.check(value, "")
    except Wrong as e:
        raise DamagedFileError(path, str(e), todo) from None
    return value
