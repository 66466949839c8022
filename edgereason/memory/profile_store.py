"""Profile files: `<device>__<generator>__<verifier>.json` under $EDGEREASON_HOME/profiles for
llama.cpp, and `<device>__<generator>__<verifier>__<backend>.json` for another backend (torch),
written by `edgereason memory-profile` and looked up at start-up. The backend is part of the key:
the same models on torch and on llama.cpp differ in KV bytes per token and in speed, so a session
finds only a profile measured on its own backend (profiles from before the backend was recorded are
llama.cpp's, and keep their names). Only the user's own profiles are read: the repository's
profiles/ folder holds reference measurements (often with small test budgets), not settings to run
with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from edgereason import models
from edgereason.errors import ConfigError, DamagedFileError
from edgereason.memory.device import slug
from edgereason.util.files import make_writable_folder, write_text_atomic
from edgereason.util.schema import Fields, ListOf, Number, Tuple, read_json_file

# what start-up reads: session/opening.py, session/kv_split.py, and the generator's curve
# session/auto_policy.py takes its pass cost from (time = rows / tok/s: no throughput is 0)
_CURVE = ListOf(Tuple((Number(whole=True, above=0), Number(above=0))), least=1)
_PROFILE = Fields(
    {
        "generator_kv_bytes": Number(whole=True, above=0),
        "verifier_kv_bytes": Number(whole=True, above=0),
        "lv_threshold_tokens": Number(whole=True, above=0),
        "curves": Fields({"generator": _CURVE, "verifier": _CURVE}),
    }
)
# the backend whose profile names carry none (every profile's, before torch's)
UNNAMED_BACKEND = "llamacpp"


def profiles_dir() -> Path:
    return models.home() / "profiles"


def check_profiles_dir() -> None:
    """Before minutes of measuring: the profile they make can be saved."""
    folder = profiles_dir()
    try:
        make_writable_folder(folder)
    except OSError as e:  # $EDGEREASON_HOME is a file, or read-only
        raise ConfigError(
            f"cannot write memory profiles to {folder}: {e.strerror or e}; set EDGEREASON_HOME to "
            "a folder you can write"
        ) from None


def verifier_id(prm: str, prm_format: str) -> str:
    """A PRM is its weights, its backend and how it is prompted: the same weights as a judge and as
    a trained PRM differ, and so do the same GGUF on llama.cpp and read into torch (`hf:`; its KV
    and speed differ)."""
    if prm.startswith(models.HF_PREFIX):
        return f"hf-{models.display_name(prm[len(models.HF_PREFIX) :])}-{prm_format}"
    return f"{models.display_name(prm)}-{prm_format}"


def profile_name(device: str, generator: str, verifier: str, backend: str = UNNAMED_BACKEND) -> str:
    tail = "" if backend == UNNAMED_BACKEND else f"__{slug(backend)}"
    return f"{slug(device)}__{slug(generator)}__{slug(verifier)}{tail}.json"


def profile_path(
    device: str, generator: str, verifier: str, backend: str = UNNAMED_BACKEND
) -> Path:
    return profiles_dir() / profile_name(device, generator, verifier, backend)


def check_profile_path(
    device: str, generator: str, verifier: str, backend: str = UNNAMED_BACKEND
) -> None:
    """Before minutes of measuring: no folder stands where the profile file goes (a file cannot
    replace one)."""
    path = profile_path(device, generator, verifier, backend)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder where the profile goes; move it away")


def write_profile(
    profile: dict, device: str, generator: str, verifier: str, backend: str = UNNAMED_BACKEND
) -> Path:
    """Atomic: a start-up reading the file never sees half of it, and two profilers of one pair
    write whole files (the last one stays)."""
    path = profile_path(device, generator, verifier, backend)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(profile | {"profile_path": str(path)}, indent=2) + "\n")
    return path


def find_profile(
    device: str, generator: str, verifier: str, backend: str = UNNAMED_BACKEND
) -> dict | None:
    """The stored profile for this device and model pair, or None (start-up then profiles or uses
    defaults). A damaged file (see read_profile) is as good as missing: None, while the file stays
    at profile_path, which is how start-up tells the two apart (and says what is wrong with it).

    generator: models.display_name(...) of the generator; verifier: verifier_id(prm, prm_format);
    backend: the local backend the session runs its generator on (and its PRM, unless an hf:
    one)."""
    try:
        return read_profile(profile_path(device, generator, verifier, backend))
    except (FileNotFoundError, DamagedFileError):
        return None


def read_profile(path: Path) -> dict:
    """A profile file, checked for what start-up reads (_PROFILE); DamagedFileError names the file
    and its first wrong field, FileNotFoundError where there is none."""
    return cast(dict, read_json_file(path, _PROFILE))
