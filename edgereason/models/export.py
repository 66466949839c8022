"""Staging an export (`edgereason models export`): the checks made before anything is written (the
target, the disk's room for the estimated size) and the folder written beside the target, then
renamed to it once whole.

A stopped export (Ctrl-C, a full disk) leaves the target as it was (absent, empty, or with --force
the folder it replaces). A process killed outright (SIGKILL) leaves its `.DIR.export-*` folder
behind. The size estimate: the weights in the export's dtype, and the vocabulary (from the GGUF's
header) spelled out in JSON. What writes the files is the caller's (a backend's writer): this
module moves folders, it reads no weights.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ConfigError, ModelError
from edgereason.models.gguf_file import GGUFFormatError, GGUFHeader, read_header
from edgereason.models.registry import human_size
from edgereason.util.files import check_no_dangling_link

# tokenizer.json spells the vocabulary and merges in about this many times their GGUF bytes
VOCABULARY_IN_JSON = 4


@dataclass(frozen=True)
class Written:
    """The folder an export left in place: what the writer said it holds, and its files."""

    architecture: str
    files: list[str]
    bytes: int


def check_target(target: Path, force: bool) -> None:
    """DIR may be absent or an empty folder; a folder with files only with --force; never a file."""
    check_no_dangling_link("DIR", target)
    if target.is_dir():
        if not force and any(target.iterdir()):
            why = f"{target} exists and is not empty"
            raise ConfigError(f"{why}; name a new folder, or pass --force to replace it")
    elif target.exists() or target.is_symlink():
        why = f"{target} exists and is not a folder"
        raise ConfigError(f"{why}; name a folder to write the model into")


def gguf_header(gguf: Path) -> GGUFHeader:
    try:
        return read_header(gguf)
    except (GGUFFormatError, OSError) as e:
        raise ModelError(f"cannot read the header of {gguf} ({e})") from None


def estimated_bytes(header: GGUFHeader, value_bytes: int) -> int:
    """The folder's size: every tensor value in `value_bytes` bytes, and the tokenizer (the GGUF's
    header, mostly vocabulary)."""
    return header.n_elements * value_bytes + VOCABULARY_IN_JSON * header.data_start


def existing_folder(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists: where the new folder will take its room."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_room(target: Path, need: int) -> None:
    where = existing_folder(target.parent)
    free = shutil.disk_usage(where).free
    if free < need:
        raise ConfigError(
            f"not enough disk space in {where}: the export takes about {human_size(need)} and "
            f"{human_size(free)} is free; free some room or name a folder on a larger disk"
        )


def write_folder(target: Path, write: Callable[[Path], str]) -> Written:
    """`write` fills a staging folder and returns the architecture it wrote; the folder then
    becomes `target`."""
    with staging_folder(target) as staging:
        architecture = write(staging)
        move_into_place(staging, target)
    files = sorted(p.name for p in target.iterdir())
    return Written(architecture, files, sum((target / name).stat().st_size for name in files))


@contextmanager
def staging_folder(target: Path) -> Iterator[Path]:
    """A hidden folder beside `target` to write into, removed unless it became `target` (the CLI
    turns Ctrl-C and SIGTERM into exceptions, so this runs then too); a write that fails is one
    line."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    except OSError as e:
        raise ConfigError(
            f"cannot write into {target.parent}: {e.strerror or e}; name a folder you can write"
        ) from None
    try:
        yield staging
    except OSError as e:  # a full disk (the estimate fell short) or a quota half-way
        why = f"could not write the folder {target}: {e.strerror or e}"
        raise ModelError(f"{why}; nothing was left there") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def move_into_place(staging: Path, target: Path) -> None:
    """Rename the whole folder to `target`, replacing an empty folder or (with --force) a full one,
    which is only removed once the new one stands in its place."""
    readable_by_all(staging)
    if not target.is_dir() or not any(target.iterdir()):
        os.replace(staging, target)  # replaces an empty folder in one step
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
    os.replace(target, old / target.name)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(old / target.name, target)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def readable_by_all(folder: Path) -> None:
    """The modes a folder made with mkdir and files made with open get (safetensors and mkdtemp
    make theirs private), so a server running as another user can read the model."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
