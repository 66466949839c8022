"""Shared outputs are created with the umask's mode, not the 0o600 of their temp files."""

from __future__ import annotations

import os
import stat

import pytest

from edgereason.bench.report import write_results
from edgereason.files import new_file_mode
from edgereason.value_head import Backbone, save_head
from tests.test_value_head import random_head


@pytest.fixture()
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_file_mode_follows_the_umask(umask_022):
    assert new_file_mode() == 0o644
    os.umask(0o077)
    assert new_file_mode() == 0o600


def test_bench_results_and_heads_are_readable_by_others_under_umask_022(tmp_path, umask_022):
    write_results(tmp_path / "bench", {}, [])
    weights, meta = save_head(random_head(Backbone("m", "m.gguf", "0" * 64)), tmp_path / "h.safetensors")
    for path in (tmp_path / "bench" / "results.json", tmp_path / "bench" / "results.csv", weights, meta):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
