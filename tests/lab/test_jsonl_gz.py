"""Whole gzip-compressed JSONL files (the lab's joined rollouts and verifier scores): read back by
the product's reader, and written whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.lab.jsonl_gz import write_jsonl_gz
from edgereason.util.jsonl import read_jsonl

ROWS = [{"id": str(i), "text": f"step {i} é"} for i in range(200)]


def test_rows_written_gzip_compressed_read_back_and_a_failed_write_leaves_the_old_file(
    tmp_path: Path,
):
    path = tmp_path / "rows.jsonl.gz"
    write_jsonl_gz(path, ROWS)
    assert path.read_bytes()[:2] == b"\x1f\x8b" and list(read_jsonl(path)) == ROWS  # gzip's magic

    def rows_then_a_crash():
        yield ROWS[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_jsonl_gz(path, rows_then_a_crash())
    assert list(read_jsonl(path)) == ROWS and [p.name for p in tmp_path.iterdir()] == [
        "rows.jsonl.gz"
    ]
