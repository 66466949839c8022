"""Damage any JSON file the program wrote earlier can come to: the tests of each reader run these,
and their own wrong fields, against it (issue 62, item 3)."""

from __future__ import annotations

DEEP = b"[" * 100_000 + b"]" * 100_000  # past Python's recursion limit, as json reads it

# name -> (the file's bytes, what the error says)
WHOLE_FILE = {
    "null": (b"null", "the top level must be an object, not null"),
    "a list": (b"[1, 2]", "the top level must be an object, not a list of 2"),
    "a string": (b'"text"', 'the top level must be an object, not "text"'),
    "nested too deep": (b'{"a": ' + DEEP + b"}", "nested too deep to read"),
    "truncated": (b'{"a": [1, 2', "not whole JSON"),
    "empty": (b"", "not whole JSON"),
    "not UTF-8": (b'{"a": "\xff\xfe"}', "not UTF-8 text (byte 7)"),
}

# name -> (a line of a JSONL file, what the error says of it); a line cut by a crash is no damage
LINE = {
    "null": (b"null", "the top level must be an object, not null"),
    "a list": (b"[1, 2]", "the top level must be an object, not a list of 2"),
    "a number": (b"42", "the top level must be an object, not 42"),
    "nested too deep": (b'{"id": ' + DEEP + b"}", "nested too deep to read"),
}
