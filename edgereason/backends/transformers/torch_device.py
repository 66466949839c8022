"""torch itself and the device a PRM runs on: kept apart from loader.py so the backend, its size
estimates and the verifier can ask for torch or the device without the checkpoint loading code,
and so the readout modules can share them without importing the loader back."""

from __future__ import annotations

from typing import Any

from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


def import_torch() -> Any:
    """torch, or one ConfigError line saying which extra to install or why torch cannot join this
    process."""
    require_one_cxx_runtime(
        "an hf: PRM loads torch into this process", "use a GGUF PRM on llama.cpp"
    )
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise ConfigError(
            "an hf: PRM runs on torch and transformers, which are not installed: pip install "
            '"edgereason[torch]"'
        ) from None
    return torch


def resolve_device(device: str) -> tuple[Any, Any]:
    """(torch.device, dtype) for `auto` (CUDA when torch sees one), `cpu` or `cuda`."""
    torch = import_torch()
    if device not in DEVICES:
        raise ConfigError(f"--prm-device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        build = (
            "a CPU-only build"
            if torch.version.cuda is None
            else f"built for CUDA {torch.version.cuda}"
        )
        raise ConfigError(
            f"--prm-device cuda, but torch {torch.__version__} ({build}) sees no CUDA device; use "
            "--prm-device cpu"
        )
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda"), torch.bfloat16
    return torch.device("cpu"), torch.float32


def on_cuda(device: str) -> bool:
    """Whether a PRM opened with --prm-device `device` runs on CUDA."""
    return resolve_device(device)[0].type == "cuda"
