"""Files the user shares (bench results, value heads) get the mode any new file gets: 0o666 less the umask.
Temp files from `tempfile.mkstemp` are 0o600, and an atomic rename would keep that. And a folder that long work
writes into is proven writable before the work starts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def new_file_mode() -> int:
    mask = os.umask(0)  # the only portable read of the umask is to set it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def make_writable_folder(folder: Path) -> None:
    """Make `folder` (and its parents) and create a file in it; OSError where either fails (a file in the way, no
    permission), before the work whose output would otherwise be lost at its end."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=folder):
        pass
