"""Shared outputs are written whole, by temp files of their own, with the umask's mode (not the
0o600 of their temp files); an output path through a link to nothing is refused before the work."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from edgereason.errors import ConfigError
from edgereason.evaluation.report import write_results
from edgereason.heads.value_head import Backbone, save_head
from edgereason.memory.profile_store import write_profile
from edgereason.util.files import (
    check_no_dangling_link,
    new_file_mode,
    write_atomic,
    write_text_atomic,
)
from tests.heads.test_value_head import random_head


@pytest.fixture()
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_file_mode_follows_the_umask(umask_022):
    assert new_file_mode() == 0o644
    os.umask(0o077)
    assert new_file_mode() == 0o600


def test_bench_results_heads_and_profiles_are_readable_by_others_under_umask_022(
    tmp_path, umask_022, monkeypatch
):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    write_results(tmp_path / "bench", {}, [])
    weights, meta = save_head(
        random_head(Backbone("m", "m.gguf", "0" * 64)), tmp_path / "h.safetensors"
    )
    profile = write_profile({}, "cpu", "gen", "prm")
    for path in (
        tmp_path / "bench" / "results.json",
        tmp_path / "bench" / "results.csv",
        weights,
        meta,
        profile,
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "profile.json"
    write_text_atomic(path, "old")

    def fail_half_way(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("no space left on device")

    with pytest.raises(OSError):
        write_atomic(path, fail_half_way)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["profile.json"]


def test_two_writers_of_one_file_each_write_a_temp_file_of_their_own(tmp_path):
    """Two memory-profile runs of one model pair shared one `NAME.json.tmp` once: one's rename moved
    the other's file, half written, or found it gone."""
    path, both_open, temps = tmp_path / "profile.json", threading.Barrier(2, timeout=10), []

    def writer(text: str) -> None:
        def write(tmp: Path) -> None:
            temps.append(tmp)
            both_open.wait()  # both temp files exist at once
            tmp.write_text(text * 1000)

        write_atomic(path, write)

    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(temps)) == 2
    assert path.read_text() in ("a" * 1000, "b" * 1000) and [
        p.name for p in tmp_path.iterdir()
    ] == ["profile.json"]


def test_an_output_through_a_link_to_nothing_is_refused_and_one_to_a_folder_is_not(tmp_path):
    (tmp_path / "there").mkdir()
    (tmp_path / "good").symlink_to(tmp_path / "there")
    (tmp_path / "bad").symlink_to("gone/\x1b[2J")  # relative, and named with an escape sequence
    for fine in ("good", "good/new/out", "plain/new"):
        check_no_dangling_link("--out", tmp_path / fine)
    for out in (tmp_path / "bad", tmp_path / "bad" / "sub" / "out"):
        with pytest.raises(ConfigError) as refused:
            check_no_dangling_link("--out", out)
        assert str(refused.value) == (
            f"--out {out}: {tmp_path / 'bad'} is a symbolic link to gone/\\x1b[2J, which does "
            "not exist; create gone/\\x1b[2J, or give another --out"
        )
