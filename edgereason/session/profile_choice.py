"""Which memory profile applies to a session (device, generator, verifier, backend), what `--policy
auto`'s cached pass cost is keyed by, and saying how to make
a profile where none exists. The backend is the one the session chose: a profile or pass cost
measured on torch is not one of llama.cpp's (KV bytes per token and speed differ)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from edgereason import models
from edgereason.errors import DamagedFileError
from edgereason.memory import default_device_id, find_profile, verifier_id
from edgereason.memory.profile_store import UNNAMED_BACKEND, profile_path, read_profile
from edgereason.session.settings import ModelSettings
from edgereason.session.start_notes import StartNote
from edgereason.util.terminal import safe_text

# under $EDGEREASON_HOME: profile file names already said to be missing
PROFILE_TIPS = "profile-tips"


def device_id(settings: ModelSettings) -> str:
    """The device this session's models run on, as profiles and the pass-cost cache name it."""
    return default_device_id("gpu" if settings.n_gpu_layers else "cpu")


def pass_cost_key(settings: ModelSettings, backend: str) -> str:
    """What `--policy auto`'s measured pass cost is cached under: the device, generator, threads and
    GPU layers, and the backend where it is not llama.cpp (llama.cpp's keys stay as they were before
    the backend was chosen)."""
    tail = "" if backend == UNNAMED_BACKEND else f"/backend={backend}"
    name, threads = models.display_name(settings.model), settings.threads or "auto"
    return (
        f"{device_id(settings)}/{name}/threads={threads}/gpu_layers={settings.n_gpu_layers}{tail}"
    )


def _profile_key(settings: ModelSettings, backend: str) -> tuple[str, str, str, str]:
    """(device, generator, verifier, backend): what this device and model pair's memory profile is
    stored under."""
    return (
        device_id(settings),
        models.display_name(settings.model),
        verifier_id(settings.prm_model, settings.prm_format),
        backend,
    )


@dataclass(frozen=True)
class ProfileLookup:
    """A session's memory profile (None where there is none, or it is damaged), its file, and where
    there is none, the tip that says how to make it."""

    profile: dict | None
    path: Path
    tip: StartNote | None = None


def profile_for(settings: ModelSettings, backend: str) -> ProfileLookup:
    """backend: the local backend the session chose (never auto)."""
    key = _profile_key(settings, backend)
    profile, path = find_profile(*key), profile_path(*key)
    tip = None if profile is not None else _profile_tip(path, settings, backend)
    return ProfileLookup(profile, path, tip)


def _profile_tip(path: Path, settings: ModelSettings, backend: str) -> StartNote | None:
    """How to profile, where no profile was found: a damaged profile is reported as such on every
    run; a missing one once per device and model pair (remembered in $EDGEREASON_HOME/profile-tips
    once shown), or on every run with --verbose."""
    command = (
        f"edgereason memory-profile --model {shlex.quote(settings.model)} --prm "
        f"{shlex.quote(settings.prm_model)}"
        + ("" if backend == UNNAMED_BACKEND else f" --backend {backend}")
        # memory-profile measures the CPU unless told
        + (" --device gpu" if settings.n_gpu_layers else "")
    )
    if path.exists():
        corrupt = f"the memory profile {path} is corrupt ({_damage(path)})"
        rebuild = f"using defaults. Rebuild it: {command}"
        return StartNote(f"edgereason: {safe_text(corrupt, one_line=True)}; {rebuild}")
    missing = (
        "edgereason: no memory profile for this device and models; using defaults. To tune: "
        + command
    )
    if settings.verbose:
        return StartNote(missing)
    if _told(path.name):
        return None
    return StartNote(missing, said=lambda: _remember(path.name))


def _damage(path: Path) -> str:
    """What is wrong with a profile find_profile took for missing, though its file is there."""
    try:
        read_profile(path)
    except DamagedFileError as e:
        return e.problem
    except OSError as e:  # gone since, or a folder
        return e.strerror or str(e)
    return "changed while it was read"


def _told(key: str) -> bool:
    """Whether the tip for `key` was shown before in this $EDGEREASON_HOME."""
    tips = models.home() / PROFILE_TIPS
    try:
        return tips.is_file() and key in tips.read_text(errors="replace").splitlines()
    except OSError:  # an unreadable home only costs repeating the tip
        return False


def _remember(key: str) -> None:
    tips = models.home() / PROFILE_TIPS
    try:
        tips.parent.mkdir(parents=True, exist_ok=True)
        with tips.open("a") as f:
            f.write(key + "\n")
    except OSError:  # an unwritable home only costs repeating the tip
        pass
