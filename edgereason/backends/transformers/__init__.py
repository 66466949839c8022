"""torch + transformers backend: a Verifier for Hugging Face PRM checkpoints (`--prm hf:PATH`),
beside a generator on another backend in the same process (backend.py: TransformersBackend, the one
interface). torch and transformers are imported when a model opens, so this package imports
without them (`pip install "edgereason[torch]"` installs them)."""

from __future__ import annotations

from pathlib import Path

from edgereason.backends.transformers.formats import TORCH_FORMATS, path_tokens
from edgereason.backends.transformers.loader import load_checkpoint
from edgereason.backends.transformers.sizes import (
    config_kv_bytes,
    kv_bytes_per_token,
    weights_bytes,
)
from edgereason.backends.transformers.torch_device import DEVICES, on_cuda
from edgereason.backends.transformers.verifier import TorchVerifier
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead

HF_PREFIX = "hf:"


def open_verifier(
    path: Path,
    fmt: str,
    kv_tokens: int,
    device: str = "auto",
    head: ValueHead | None = None,
    n_threads: int | None = None,
) -> TorchVerifier:
    """The checkpoint at `path` (a folder or a .gguf file) as a Verifier reading `fmt`; `head` for
    the head format."""
    if fmt not in TORCH_FORMATS:  # before loading gigabytes
        raise ConfigError(
            f"unknown PRM format {fmt!r} for an hf: PRM; choose one of {', '.join(TORCH_FORMATS)}"
        )
    checkpoint = load_checkpoint(path, fmt, device=device, head=head, n_threads=n_threads)
    tokens = path_tokens(fmt, checkpoint.tokenizer)
    return TorchVerifier(
        checkpoint, fmt, tokens, kv_tokens, config_kv_bytes(checkpoint.config, checkpoint.dtype)
    )


__all__ = [
    "DEVICES",
    "HF_PREFIX",
    "TORCH_FORMATS",
    "TorchVerifier",
    "kv_bytes_per_token",
    "on_cuda",
    "open_verifier",
    "weights_bytes",
]
