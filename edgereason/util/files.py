"""Files the user shares (bench results, value heads, memory profiles) are written whole or not at
all, with the mode any new file gets: 0o666 less the umask (temp files from `tempfile.mkstemp` are
0o600, and a rename would keep that). And a folder that long work writes into is proven writable
before the work starts."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def cache_home() -> Path:
    """$EDGEREASON_HOME, else ~/.cache/edgereason: models, profiles, caches. An empty value is unset
    (`EDGEREASON_HOME= cmd`), not the current folder: the cache would move with `cd`."""
    return Path(os.environ.get("EDGEREASON_HOME") or Path.home() / ".cache" / "edgereason")


def new_file_mode() -> int:
    mask = os.umask(0)  # the only portable read of the umask is to set it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def make_writable_folder(folder: Path) -> None:
    """Make `folder` (and its parents) and create a file in it; OSError where either fails (a file
    in the way, no permission), before the work whose output would otherwise be lost at its end."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=folder):
        pass


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Readers see the old file or the new one, never part of one: `write` fills a temp file beside
    `path`, of a name of its own (two writers never share one), which then takes the place of
    `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        # after the write: some writers (safetensors) make the file anew
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """`write_atomic` of a text, synced to the disk before the rename."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    write_atomic(path, write)
