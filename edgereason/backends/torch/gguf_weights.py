"""A GGUF's tensors and model shape, as the torch backend reads them: the config from the metadata
(llama and qwen2 only), each tensor dequantized on demand (gguf's own dequantizers), or a matrix
read as 4-bit groups for --torch-weights int4 (int4_weights.py converts the blocks handed to it)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf.constants import GGMLQuantizationType
from gguf.quants import quant_shape_to_byte_shape

from edgereason.backends.torch.int4_weights import EXACT_TYPES, GROUP, Int4Weight, int4_weight
from edgereason.errors import ModelError
from edgereason.util.gguf_layout import GGUFLayout, TensorInfo, read_layout

ARCHITECTURES = ("llama", "qwen2")
_PERMUTED_ROPE = {"llama"}  # llama.cpp's converter permuted these architectures' Q and K rows
_PLAIN = {  # the types gguf-py's reader gives as numbers, not bytes
    GGMLQuantizationType.F16: np.float16,
    GGMLQuantizationType.F32: np.float32,
    GGMLQuantizationType.F64: np.float64,
    GGMLQuantizationType.I8: np.int8,
    GGMLQuantizationType.I16: np.int16,
    GGMLQuantizationType.I32: np.int32,
    GGMLQuantizationType.I64: np.int64,
}


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


def layout_of(path: Path) -> GGUFLayout:
    """The file's layout, read once for each version of the file (its path, size and mtime): a
    session reads the table for the model's size and KV bytes (weights_table), then loads the
    weights (load_model), and each read walks the header past the vocabulary's arrays (0.5-1 s)."""
    st = path.stat()
    return _read_layout(str(path.resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _read_layout(path: str, size: int, mtime_ns: int) -> GGUFLayout:
    return read_layout(Path(path))


class Weights:
    """A GGUF's tensors by name, dequantized on demand to a torch tensor on `device`. The layout is
    read past the vocabulary's arrays (util/gguf_layout.py; once a file: layout_of), the tensor data
    mapped, not read."""

    def __init__(self, path: Path) -> None:
        try:
            self.layout = layout_of(path)
            self.data = np.memmap(path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as e:
            raise ModelError(f"{path}: not a GGUF file the torch backend can read ({e})") from None
        if self.layout.size > len(self.data):
            raise ModelError(
                f"{path}: the file ends at {len(self.data):,} bytes where its tensors end at "
                f"{self.layout.size:,}: a copy or download cut short; fetch it again"
            )
        self.path = path
        self.tensors = {t.name: t for t in self.layout.tensors}

    @property
    def permuted_rope(self) -> bool:
        """Q and K rows as llama.cpp's converter permuted them (the decoder un-permutes them)."""
        return self.meta("general.architecture") in _PERMUTED_ROPE

    @property
    def gguf(self) -> Weights:
        """The GGUF whose raw blocks hold the tensors (int4 reads them): this file."""
        return self

    def meta(self, key: str, default: Any = None) -> Any:
        """A scalar or string value; an array's key gives True (its values are not read)."""
        if key in self.layout.array_keys:
            return True
        return self.layout.metadata.get(key, default)

    def has(self, name: str) -> bool:
        return name in self.tensors

    def config(self) -> ModelConfig:
        return read_config(self)

    def n_elements(self) -> int:
        return sum(t.n_elements for t in self.layout.tensors)

    def load(self, name: str, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        from gguf.quants import dequantize

        tensor = self._tensor(name)
        kind = GGMLQuantizationType(tensor.kind)
        try:
            values = dequantize(self._raw(tensor, kind), kind)
        except NotImplementedError:
            raise ModelError(
                f"{self.path.name}: tensor {name} is of type {kind.name}, which the torch "
                "backend cannot dequantize; use --backend llamacpp"
            ) from None
        # GGUF lists dimensions innermost first
        shape = tuple(int(n) for n in reversed(tensor.dims))
        if not values.flags.writeable:  # a float tensor is a view of the read-only file map
            values = values.copy()
        return torch.from_numpy(np.ascontiguousarray(values).reshape(shape)).to(
            device=device, dtype=dtype
        )

    def int4(self, name: str) -> Int4Weight:
        """A matrix [N, K] as 4-bit groups (int4_weights.py): converted from its raw blocks where
        its type is 4-bit with groups of 32, else requantized from its dequantized values."""
        tensor = self._tensor(name)
        rows, cols = (int(n) for n in reversed(tensor.dims)) if len(tensor.dims) == 2 else (0, 0)
        if rows == 0 or cols % GROUP:
            raise ModelError(
                f"{self.path.name}: tensor {name} {tuple(reversed(tensor.dims))} is not a matrix "
                f"with rows a multiple of {GROUP} long; it cannot be held as 4-bit groups"
            )
        kind = GGMLQuantizationType(tensor.kind)
        if kind in EXACT_TYPES:
            data = np.asarray(self._bytes(tensor))
        else:
            data = self.load(name, torch.device("cpu"), torch.float32).numpy()
        return int4_weight(kind, data, rows, cols)

    def _tensor(self, name: str) -> TensorInfo:
        tensor = self.tensors.get(name)
        if tensor is None:
            raise ModelError(
                f"{self.path.name} has no tensor {name}: a corrupt or unsupported GGUF"
            )
        return tensor

    def _bytes(self, tensor: TensorInfo) -> np.memmap:
        """The tensor's bytes in the file map (not read)."""
        start = self.layout.data_start + tensor.offset
        return self.data[start : start + tensor.n_bytes]

    def _raw(self, tensor: TensorInfo, kind: GGMLQuantizationType) -> np.ndarray:
        """The tensor's bytes as gguf-py's reader gives them: typed values for plain number types,
        else bytes shaped [rows, bytes of a row]."""
        raw = self._bytes(tensor)
        dims = tuple(reversed(tensor.dims))
        if kind in _PLAIN:
            return raw.view(_PLAIN[kind]).reshape(dims)
        return raw.reshape(quant_shape_to_byte_shape(dims, kind))


def read_config(weights: Weights) -> ModelConfig:
    arch = weights.meta("general.architecture")
    if arch not in ARCHITECTURES:
        raise ModelError(
            f"{weights.path.name} is a {arch} model; the torch backend runs "
            f"{', '.join(ARCHITECTURES)}: use --backend llamacpp"
        )
    scaling = weights.meta(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", ""):
        raise ModelError(
            f"{weights.path.name} scales its rotary positions ({scaling}), which the torch backend "
            "does not: use --backend llamacpp"
        )
    n_embd = int(weights.meta(f"{arch}.embedding_length"))
    n_head = int(weights.meta(f"{arch}.attention.head_count"))
    head_dim = int(weights.meta(f"{arch}.attention.key_length", n_embd // n_head))
    vocab = weights.tensors["token_embd.weight"].dims
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
