"""Files the user shares (bench results, value heads, memory profiles) are written whole or not at
all, with the mode any new file gets: 0o666 less the umask (temp files from `tempfile.mkstemp` are
0o600, and a rename would keep that). And a folder that long work writes into is proven writable
before the work starts, and an output path through a symbolic link to nothing is refused then."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from edgereason.errors import ConfigError
from edgereason.util.terminal import shown_path


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


def check_no_dangling_link(flag: str, path: Path) -> None:
    """ConfigError where `path`, or a folder above it, is a symbolic link to nothing: mkdir says
    only "File exists" there, and a write through it fails, or lands where the user did not look,
    after the work that made it."""
    link = next((part for part in (*reversed(path.parents), path) if _dangling(part)), None)
    if link is not None:
        target = shown_path(os.readlink(link))
        raise ConfigError(
            f"{flag} {shown_path(path)}: {shown_path(link)} is a symbolic link to {target}, which "
            f"does not exist; create {target}, or give another {flag}"
        )


def _dangling(path: Path) -> bool:
    try:
        return path.is_symlink() and not path.exists()
    except OSError:  # no permission to look: the write that follows says so
        return False


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
