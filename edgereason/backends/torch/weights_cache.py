"""A GGUF's tensors dequantized once and kept: gguf's numpy dequantizers are slow, and a process
would pay them every time it opens the model; the dequantized copy, a safetensors file in
$EDGEREASON_HOME/torch, reads many times faster (docs/results.md, "Figures behind the code's
choices"). Kept for bf16 (what a GPU runs), not for the CPU's float32 (twice the disk, and the CPU's
work is tests and small models). The file's name holds the GGUF's size and mtime: a new GGUF of the
same name makes a new copy and the old one is removed. Where it cannot be written (no room,
read-only), the weights load as before."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import torch

from edgereason.backends.torch.gguf_weights import ModelConfig, Weights
from edgereason.util.files import cache_home, write_atomic

CACHED_DTYPES = (torch.bfloat16,)


class Tensors(Protocol):
    """Named tensors read one at a time (a safetensors file opened, or _InMemory)."""

    def keys(self) -> Iterable[str]: ...

    def get_tensor(self, name: str) -> torch.Tensor: ...


class _InMemory(dict[str, torch.Tensor]):
    """The tensors just dequantized, read as the kept file's are."""

    def get_tensor(self, name: str) -> torch.Tensor:
        return self[name]


def cache_file(gguf: Path, dtype: torch.dtype) -> Path:
    st = gguf.stat()
    kind = str(dtype).removeprefix("torch.")
    return cache_home() / "torch" / f"{gguf.stem}.{st.st_size}-{st.st_mtime_ns}.{kind}.safetensors"


class CachedWeights:
    """Weights' interface (config, has, load, n_elements, permuted_rope, gguf) over the kept copy of
    every tensor, made on first use from the GGUF."""

    def __init__(self, weights: Weights, dtype: torch.dtype) -> None:
        self.weights = weights
        self.gguf = weights  # its raw blocks: int4 reads the file's own 4-bit values
        self.path = weights.path
        self.dtype = dtype
        self.permuted_rope = weights.permuted_rope
        self.file = cache_file(weights.path, dtype)
        self._tensors: Tensors | None = None

    def config(self) -> ModelConfig:
        return self.weights.config()

    def has(self, name: str) -> bool:
        return self.weights.has(name)

    def n_elements(self) -> int:
        return self.weights.n_elements()

    def load(self, name: str, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if dtype != self.dtype:
            return self.weights.load(name, device, dtype)
        if self._tensors is None:
            self._tensors = self._open(device) or _InMemory(self._make())
        if name not in self._tensors.keys():  # the GGUF's own error for a missing tensor
            return self.weights.load(name, device, dtype)
        return self._tensors.get_tensor(name).to(device)

    def _open(self, device: torch.device) -> Tensors | None:
        """The kept copy opened for reading each tensor from its mapped file straight to `device`:
        no copy of the whole file in host memory first."""
        from safetensors import SafetensorError, safe_open

        if not self.file.is_file():
            return None
        try:
            return safe_open(self.file, framework="pt", device=str(device))
        except (OSError, SafetensorError):  # cut short or damaged: make it again
            return None

    def _make(self) -> dict[str, torch.Tensor]:
        from safetensors.torch import save_file

        cpu = torch.device("cpu")
        tensors = {name: self.weights.load(name, cpu, self.dtype) for name in self.weights.tensors}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, lambda tmp: save_file(tensors, str(tmp)))
            kind = self.file.name.rsplit(".", 2)[1]
            for old in self.file.parent.glob(f"{self.path.stem}.*.{kind}.safetensors"):
                if old != self.file:  # the copy of an earlier file of this name
                    old.unlink(missing_ok=True)
        except OSError as e:
            print(
                f"note: the dequantized weights could not be kept in {self.file.parent} "
                f"({e.strerror or e}); the next start dequantizes them again",
                file=sys.stderr,
            )
        return tensors
