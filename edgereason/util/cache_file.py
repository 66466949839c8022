"""A cache or a profile under $EDGEREASON_HOME, read back through the one validating reader
(schema.py): missing or damaged, it counts as missing. A damaged one is said once a process, in
one note that names the file, its first wrong field and what happens instead; the measurement
made instead writes it whole again."""

from __future__ import annotations

import sys
from pathlib import Path

from edgereason.errors import DamagedFileError
from edgereason.util.schema import Schema, read_json_file
from edgereason.util.terminal import safe_text

_noted: set[Path] = set()  # damaged files said so already


def read_cache(path: Path, schema: Schema, instead: str) -> object | None:
    """The file's value; None where it is missing (no home folder to hold it, too) or damaged.
    instead: what the caller does without it ("measuring the pass cost again")."""
    if not path.is_file():
        return None
    try:
        return read_json_file(path, schema)
    except FileNotFoundError:  # removed since
        return None
    except DamagedFileError as e:
        note_damaged(path, e.problem, instead)
        return None


def note_damaged(path: Path, problem: str, instead: str) -> None:
    """The one note, once a process, that `path` is damaged (`problem`) and what happens
    `instead`: for a cache read by its own reader (a binary file), as read_cache says it."""
    if path not in _noted:
        _noted.add(path)
        damaged = safe_text(f"{path} is damaged ({problem})", one_line=True)
        print(f"edgereason: note: {damaged}; {instead}", file=sys.stderr)
