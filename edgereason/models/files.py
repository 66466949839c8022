"""The model cache under $EDGEREASON_HOME and the checks a model file passes before anything loads
it."""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable
from pathlib import Path

from edgereason.errors import ConfigError, ModelError
from edgereason.models.gguf_file import GGUF_MAGIC, GGUFFormatError, expected_size
from edgereason.models.registry import REGISTRY, ModelSpec, human_size
from edgereason.util.files import cache_home, make_writable_folder


def home() -> Path:
    return cache_home()


def cache_path(spec: ModelSpec) -> Path:
    return home() / "models" / spec.filename


def is_cached(spec: ModelSpec) -> bool:
    path = cache_path(spec)
    try:
        mode = file_mode(path)
    # a cache folder without search permission: no pull could write there either
    except OSError as e:
        raise ConfigError(
            f"cannot read the model cache {path_in_message(path.parent)}: {e.strerror or e}; set "
            "EDGEREASON_HOME to a folder you can read and write"
        ) from None
    return mode is not None and stat.S_ISREG(mode)


def size_problem(spec: ModelSpec) -> str | None:
    """What is wrong with the cached file's size, its first word the file's state: "incomplete
    (50 MB of 98 MB)" (a copy, a restore or a full disk cut it short) or "damaged (...)". None where
    it has the registry's size: the check every start can afford (a pull checks the whole file's
    sha256). For a cached file (is_cached)."""
    size = cache_path(spec).stat().st_size
    if size == spec.size:
        return None
    if size < spec.size:
        return f"incomplete ({human_size(size)} of {human_size(spec.size)})"
    return f"damaged ({human_size(size)} where the model has {human_size(spec.size)})"


def file_mode(path: Path) -> int | None:
    """`path`'s st_mode, None where nothing is there; OSError where that cannot be told (no
    permission on a folder above it, a name too long, a symlink loop): pathlib's exists() and
    is_file() raise some of those, not others."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_gguf(
    path: Path, role: str = "model", fix: str = "re-download or pull it again", whole: bool = False
) -> None:
    """Fail early, with a clear message, on a missing, empty or non-GGUF file. `role` names the file
    in the message ("model", "PRM"), so the user knows which flag to fix; `fix` says how to get a
    good file. whole: also a file cut short, for a caller that loads nothing (llama.cpp finds those
    as it loads)."""
    shown = path_in_message(path)
    try:
        mode = file_mode(path)
    except OSError as e:
        raise ModelError(
            f"cannot read {role} file {shown}: {e.strerror or e}; check the path and the "
            "permissions of its folders"
        ) from None
    if mode is None:
        raise ModelError(
            f"{role} file not found: {shown}; check the path, or name one of {', '.join(REGISTRY)}"
        )
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise ModelError(f"{role} path {shown} is {kind}; give the path of a .gguf file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:  # no read permission, a file on a lost mount
        raise ModelError(
            f"cannot read {role} file {shown}: {e.strerror or e}; check its permissions"
        ) from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"{role} {shown} is not a GGUF file (corrupt or wrong format); {fix}")
    if whole:
        _check_whole(path, role, fix)


def _check_whole(path: Path, role: str, fix: str) -> None:
    shown = path_in_message(path)
    try:
        need, size = expected_size(path), path.stat().st_size
    except GGUFFormatError as e:
        raise ModelError(f"{role} {shown} is damaged or cut short ({e}); {fix}") from None
    except OSError as e:  # a lost mount, a file system that cannot map files
        raise ModelError(f"cannot read {role} file {shown}: {e.strerror or e}") from None
    if size < need:
        raise ModelError(
            f"{role} {shown} is cut short: {size:,} of the {need:,} bytes its header describes (a "
            f"copy or download that stopped?); {fix}"
        )


def path_in_message(path: Path) -> str:
    """A path as an error shows it: as given, or quoted with escapes where it holds a line break, a
    terminal control sequence or bytes that are not UTF-8, so that the error stays one line and the
    terminal as it was."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def sha256(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            if progress:
                progress(len(chunk))
    return digest.hexdigest()


def prepare_cache(spec: ModelSpec) -> None:
    """Before a download that would fail only at its end: the cache folder can be written, and
    nothing but a file is where the model goes (a file is replaced once the new one is whole)."""
    target = cache_path(spec)
    try:
        make_writable_folder(target.parent)
        mode = file_mode(target)
    except OSError as e:  # $EDGEREASON_HOME is a file, or read-only
        raise ConfigError(
            f"cannot write the model cache {path_in_message(target.parent)}: {e.strerror or e}; "
            "set EDGEREASON_HOME to a folder you can write"
        ) from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "something other than a file"
        raise ModelError(
            f"{path_in_message(target)} is {kind}, where the model file of {spec.name} goes; move "
            f"it away and run: edgereason models pull {spec.name}"
        )
