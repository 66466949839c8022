"""torch's compile caches carried from one process to the next (torch.compiler's cache artifacts:
inductor's FX graphs, AOTAutograd's entries, Triton's kernels), so a warm process traces its layer
but compiles no kernel. A process that compiled saves what it compiled at its end, in one file a
model under $EDGEREASON_HOME/torch keyed by torch's version, the device's name and the model; the
next process of that model loads it before its first compile. Inductor's own caches there
(compiled_layers.cache_dir) hold the same entries on this machine; the artifact file is what
survives them (another machine's home, a cache folder removed). A damaged file counts as missing
(util/cache_file), and a process that cannot write one runs on."""

from __future__ import annotations

import atexit
import logging
import re
from pathlib import Path

import torch

from edgereason.backends.torch import compiled_layers
from edgereason.util.cache_file import note_damaged
from edgereason.util.files import cache_home, write_atomic
from edgereason.util.startup import phase

PREFIX = "compile-"

_loaded: set[Path] = set()  # artifact files read in this process


def artifact_file(model: Path, device: torch.device) -> Path:
    """The model's artifacts for this torch and this device."""
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    key = "-".join(re.sub(r"[^\w.+]+", "_", part) for part in (torch.__version__, card, model.stem))
    return cache_home() / "torch" / f"{PREFIX}{key}.bin"


@phase("compiles")
def load(model: Path, device: torch.device) -> None:
    """The model's artifacts into torch's caches, once a process; saved again at its end."""
    path = artifact_file(model, device)
    if path in _loaded:
        return
    compiled_layers.use_cache_dir()  # the artifacts fill the caches there
    _read(path)
    _loaded.add(path)
    atexit.register(save, path)


def _read(path: Path) -> None:
    """What `path` holds into torch's caches; nothing where it is missing or damaged."""
    try:
        held = path.read_bytes()
    except OSError:
        return
    torch_log = logging.getLogger("torch.compiler._cache")
    quiet = torch_log.level
    torch_log.setLevel(logging.CRITICAL)  # it logs a bad file's traceback, then returns None
    try:
        loaded = torch.compiler.load_cache_artifacts(held)
        problem = None if loaded is not None else "its checksum or contents do not match"
    except Exception as e:  # noqa: BLE001 - torch unpickles what it reads: any error is a bad file
        problem = f"{type(e).__name__}: {e}"
    finally:
        torch_log.setLevel(quiet)
    if problem is not None:
        note_damaged(path, problem, "compiling the passes anew")
        path.unlink(missing_ok=True)
    else:
        _keep(held)


def _keep(held: bytes) -> None:
    """The artifacts loaded, saved at the end with this process's own: torch records only what a
    process compiles, so one that compiled one more shape would save that shape alone. Through
    the artifact manager's own lists (no public call adds to them)."""
    from torch.compiler._cache import CacheArtifactManager as manager

    for kind, artifacts in (manager.deserialize(held) or {}).items():
        for artifact in artifacts:
            if artifact not in manager._seen_artifacts:
                manager._new_cache_artifacts[kind].append(artifact)
                manager._seen_artifacts.add(artifact)


def save(path: Path) -> None:
    """What this process compiled and loaded, where it compiled something its caches lacked (a
    process whose every compile hit the caches has nothing to add)."""
    from torch._dynamo.utils import counters

    if not counters["inductor"]["fxgraph_cache_miss"]:
        return
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp: tmp.write_bytes(saved[0]))
        for old in path.parent.glob(f"{PREFIX}*"):
            if old.name.split("-", 2)[1] != torch.__version__:  # another torch's: never read
                old.unlink(missing_ok=True)
    except OSError:  # no room, read-only: the next process compiles again
        pass
