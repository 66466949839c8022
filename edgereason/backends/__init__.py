"""The backends' front, the one part of backends/ the layers above import: the interface every
backend implements (interface.py: Backend, its Capabilities, the Placement and PRMSpec it is
told), the remote settings the CLI builds, the C++ runtime check (cxx_runtime.py: training and the
plots load a second runtime into the process) and `load_backend`, which opens a backend by name.

The concrete backends (llamacpp, torch, transformers, remote) are reached only through the registry
below, and import none of each other: what two of them share is a module of this package that
imports none of them (pyproject.toml's import contracts).
"""

from __future__ import annotations

import importlib
from functools import cache

from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.backends.interface import Backend, Capabilities, OnDisk, Placement, PRMSpec
from edgereason.backends.remote_settings import (
    DEFAULT_MAX_ANSWER_MIB,
    DEFAULT_STEP_TOKENS,
    Endpoint,
    RemoteSettings,
    check_url,
)
from edgereason.errors import ConfigError

# name -> the module and class that implement it, imported when first asked for (a fast CLI start)
REGISTRY: dict[str, tuple[str, str]] = {
    "llamacpp": ("edgereason.backends.llamacpp.backend", "LlamaCppBackend"),
    "torch": ("edgereason.backends.torch.backend", "TorchBackend"),
    "transformers": ("edgereason.backends.transformers.backend", "TransformersBackend"),
    "remote": ("edgereason.backends.remote.backend", "RemoteBackend"),
}


@cache
def load_backend(name: str) -> Backend:
    """The backend registered as `name` (one instance per process), or one ConfigError line."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; available: {', '.join(REGISTRY)}")
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)()


__all__ = [
    "DEFAULT_MAX_ANSWER_MIB",
    "DEFAULT_STEP_TOKENS",
    "Backend",
    "Capabilities",
    "Endpoint",
    "OnDisk",
    "Placement",
    "PRMSpec",
    "REGISTRY",
    "RemoteSettings",
    "check_url",
    "load_backend",
    "require_one_cxx_runtime",
]
