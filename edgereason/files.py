"""Files the user shares (bench results, value heads) get the mode any new file gets: 0o666 less the umask.
Temp files from `tempfile.mkstemp` are 0o600, and an atomic rename would keep that."""

from __future__ import annotations

import os


def new_file_mode() -> int:
    mask = os.umask(0)  # the only portable read of the umask is to set it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask
