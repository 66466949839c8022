"""Whole gzip-compressed JSONL files of rows (joined rollouts, a verifier's scores), written whole
or not at all; edgereason.util.jsonl.read_jsonl reads them back."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path

from edgereason.util.files import write_atomic


def write_jsonl_gz(path: Path, rows: Iterable[dict]) -> None:
    """`rows` as gzip-compressed JSONL, written whole or not at all (read_jsonl reads it back)."""

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)

    write_atomic(path, write)
