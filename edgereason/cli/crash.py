"""The last resort for an exception no check caught (a bug): one line on stderr, the traceback in a
log file under $EDGEREASON_HOME/logs named in that line. It is no excuse for a missing check: every
mistake a user or a server can make has its own line (errors.EdgeReasonError)."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from edgereason.util.files import cache_home
from edgereason.util.secrets import hide_credentials
from edgereason.util.terminal import safe_text

SHOWN_CHARS = 200  # the most of the exception's own message in the line


def crash_line(err: BaseException, secrets: Iterable[str | None] = ()) -> str:
    """The line that says what happened and where its traceback is, after writing that traceback
    (credentials and `secrets` as ***) to a new file under $EDGEREASON_HOME/logs."""
    said = safe_text(hide_credentials(f"{type(err).__name__}: {err}", secrets), one_line=True)
    said = said[:SHOWN_CHARS] + ("..." if len(said) > SHOWN_CHARS else "")
    folder = cache_home() / "logs"
    try:
        path = _write_log(
            folder, hide_credentials("".join(traceback.format_exception(err)), secrets)
        )
    except OSError as e:
        unwritten = f"its traceback could not be written to {folder}: {e.strerror}"
        return f"unexpected {said} (a bug; {unwritten})"
    return f"unexpected {said} (a bug: please report it with the traceback in {path})"


def _write_log(folder: Path, text: str) -> Path:
    """A new file of `text`, readable by its owner alone (a traceback may quote a problem or a
    path)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"crash-{stamp}-{os.getpid()}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
    return path
