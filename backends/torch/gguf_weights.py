"""A GGUF's tensors and model shape, as the torch backend reads them: the config from the metadata (llama and qwen2
only), each tensor dequantized on demand (gguf's own dequantizers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgereason.errors import ModelError

ARCHITECTURES = ("llama", "qwen2")
_PERMUTED_ROPE = {"llama"}  # llama.cpp's converter permuted these architectures' Q and K rows


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx_train: int
    eps: float
    rope_base: float


class Weights:
    """A GGUF's tensors by name, dequantized on demand to a torch tensor on `device`."""

    def __init__(self, path: Path) -> None:
        from gguf import GGUFReader

        try:
            self.reader = GGUFReader(str(path))
        except (OSError, ValueError) as e:
            raise ModelError(f"{path}: not a GGUF file the torch backend can read ({e})") from None
        self.path = path
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.permuted_rope = self.meta("general.architecture") in _PERMUTED_ROPE

    def meta(self, key: str, default: Any = None) -> Any:
        field = self.reader.get_field(key)
        return default if field is None else field.contents()

    def has(self, name: str) -> bool:
        return name in self.tensors

    def config(self) -> ModelConfig:
        return read_config(self)

    def n_elements(self) -> int:
        return sum(int(t.n_elements) for t in self.reader.tensors)

    def load(self, name: str, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        from gguf.quants import dequantize

        tensor = self.tensors.get(name)
        if tensor is None:
            raise ModelError(f"{self.path.name} has no tensor {name}: a corrupt or unsupported GGUF")
        try:
            values = dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError:
            raise ModelError(
                f"{self.path.name}: tensor {name} is of type {tensor.tensor_type.name}, which the torch "
                "backend cannot dequantize; use --backend llamacpp"
            ) from None
        shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists dimensions innermost first
        if not values.flags.writeable:  # a float tensor is a view of the read-only file map
            values = values.copy()
        return torch.from_numpy(np.ascontiguousarray(values).reshape(shape)).to(device=device, dtype=dtype)


def read_config(weights: Weights) -> ModelConfig:
    arch = weights.meta("general.architecture")
    if arch not in ARCHITECTURES:
        raise ModelError(
            f"{weights.path.name} is a {arch} model; the torch backend runs {', '.join(ARCHITECTURES)}: "
            "use --backend llamacpp"
        )
    scaling = weights.meta(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", ""):
        raise ModelError(
            f"{weights.path.name} scales its rotary positions ({scaling}), which the torch backend does "
            "not: use --backend llamacpp"
        )
    n_embd = int(weights.meta(f"{arch}.embedding_length"))
    n_head = int(weights.meta(f"{arch}.attention.head_count"))
    head_dim = int(weights.meta(f"{arch}.attention.key_length", n_embd // n_head))
    vocab = weights.tensors["token_embd.weight"].shape
    return ModelConfig(
        arch=arch,
        n_layer=int(weights.meta(f"{arch}.block_count")),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=int(weights.meta(f"{arch}.attention.head_count_kv", n_head)),
        head_dim=head_dim,
        n_vocab=int(vocab[1]),
        n_ctx_train=int(weights.meta(f"{arch}.context_length", 0)),
        eps=float(weights.meta(f"{arch}.attention.layer_norm_rms_epsilon")),
        rope_base=float(weights.meta(f"{arch}.rope.freq_base", 10000.0)),
    )
