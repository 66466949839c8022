"""Model runtimes behind the Generator and Verifier protocols, registered by name."""

from __future__ import annotations

from typing import Callable

from edgereason.errors import ConfigError

BACKENDS: tuple[str, ...] = ("llamacpp",)


def load_backend(name: str) -> Callable:
    """Return the backend's `open_models` function; imported lazily so the CLI starts fast."""
    if name == "llamacpp":
        from edgereason.backends.llamacpp import open_models

        return open_models
    raise ConfigError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
