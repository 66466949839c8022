"""`resolve(name_or_path)`, what every command calls: a local `.gguf` path is used as it is; a
registry name is looked up in the cache and pulled on first use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from edgereason.errors import ConfigError, ModelError
from edgereason.models import download
from edgereason.models.files import cache_path, check_gguf, file_mode, is_cached, size_problem
from edgereason.models.registry import REGISTRY


def resolve(
    name_or_path: str,
    allow_pull: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    role: str = "model",
    whole: bool = False,
) -> Path:
    """A registry name or a path to a local .gguf -> a checked local GGUF path. `role` ("model",
    "PRM") names it in errors; whole: check_gguf's."""
    if not name_or_path.strip():  # Path("") is the current folder: "path is not a file: ."
        raise ConfigError(
            f"the {role} name is empty; name one of {', '.join(REGISTRY)} or give a path to a "
            ".gguf file"
        )
    if name_or_path in REGISTRY:
        spec = REGISTRY[name_or_path]
        if not is_cached(spec):
            if not allow_pull:
                raise ModelError(
                    f"model {spec.name} is not downloaded; run: edgereason models pull {spec.name}"
                )
            download.pull(spec.name, progress)
        path = cache_path(spec)
        fix = f"run: edgereason models pull {spec.name}"
    else:
        if not _names_a_file(name_or_path):
            raise ConfigError(
                f"unknown {role} {name_or_path!r}; known: {', '.join(REGISTRY)} (or give a path to "
                "a .gguf file)"
            )
        path = Path(name_or_path).expanduser()
        fix = "re-download it or pick another model"
    check_gguf(path, role, fix, whole)
    # a registry model has a known size: llama.cpp would fail on a file cut short with less to say
    if name_or_path in REGISTRY and (wrong := size_problem(REGISTRY[name_or_path])):
        raise ModelError(f"the cached model {name_or_path} is {wrong}; {fix}")
    return path


def _names_a_file(name: str) -> bool:
    """A path, not a registry name: it has a folder or ~ in it, ends in .gguf, or is there on disk.
    A missing file is a missing model file (exit 1) however it is spelled; only a bare word outside
    the registry is an unknown name (exit 2)."""
    return (
        "/" in name
        or name.startswith(("~", "."))
        or name.lower().endswith(".gguf")
        or _on_disk(Path(name))
    )


def _on_disk(path: Path) -> bool:
    try:
        return file_mode(path) is not None
    except OSError:  # there, or it may be: check_gguf says what keeps it from being read
        return True
