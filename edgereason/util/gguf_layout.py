"""A GGUF file's layout, read without loading the model (the GGUF spec, versions 2 and 3): its
scalar and string metadata (arrays, the vocabulary among them, are skipped, their keys kept), and
each tensor's name, dimensions, type and place in the file. gguf-py's GGUFReader builds every array
value in Python (12 s for SmolLM2, 48 s for the 1.5B on a loaded 2-core machine); this walks past
them in a second."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
_ALIGNMENT_KEY = b"general.alignment"
_MAX_DIMS = 4

# metadata value types: fixed-size scalars; 8 is a string (u64 length, bytes), 9 an array (item type
# u32, count u64, items)
_SCALAR_FORMATS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_SCALAR_SIZES = {kind: struct.calcsize(fmt) for kind, fmt in _SCALAR_FORMATS.items()}
_STRING, _ARRAY, _UINT32 = 8, 9, 4

# ggml tensor type -> (elements per block, bytes per block), as gguf-py's GGML_QUANT_SIZES
_BLOCKS = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 40),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    16: (256, 66),
    17: (256, 74),
    18: (256, 98),
    19: (256, 50),
    20: (32, 18),
    21: (256, 110),
    22: (256, 82),
    23: (256, 136),
    24: (1, 1),
    25: (1, 2),
    26: (1, 4),
    27: (1, 8),
    28: (1, 8),
    29: (256, 56),
    30: (1, 2),
    34: (256, 54),
    35: (256, 66),
    39: (32, 17),
    40: (64, 36),
    41: (128, 18),
}


class GGUFFormatError(ValueError):
    """The header cannot be read: cut short inside it, or values no GGUF writer makes."""


class _Reader:
    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        self.skip(size)
        return struct.unpack_from(fmt, self.data, self.pos - size)

    def skip(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise GGUFFormatError("the file ends inside its header")
        self.pos += n

    def string(self) -> bytes:
        (n,) = self.take("<Q")
        self.skip(n)
        return bytes(self.data[self.pos - n : self.pos])

    def count(self, fmt: str, least_bytes: int) -> int:
        """A count of entries each at least `least_bytes` long: more than the file holds is a
        damaged header (it would take minutes to walk)."""
        (n,) = self.take(fmt)
        if n * least_bytes > len(self.data) - self.pos:
            raise GGUFFormatError(f"its header counts {n:,} entries, more than the file holds")
        return n


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # innermost first, as the file lists them
    kind: int  # the ggml type
    offset: int  # from the start of the tensor data
    n_bytes: int  # a type the block table lacks counts one byte
    n_elements: int


@dataclass(frozen=True)
class GGUFLayout:
    metadata: dict[str, Any]  # the scalar and string values by key
    array_keys: frozenset[str]  # the keys of array values (skipped)
    tensors: tuple[TensorInfo, ...]
    data_start: int  # where the tensor data begins: the header's bytes, the vocabulary's included
    size: int  # the bytes a whole file has: its tensor data's end


def read_layout(path: Path) -> GGUFLayout:
    """GGUFFormatError where the header cannot be read; OSError where the file cannot."""
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise GGUFFormatError("not a GGUF file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _layout(_Reader(data))


def _layout(r: _Reader) -> GGUFLayout:
    r.skip(len(GGUF_MAGIC))
    (version,) = r.take("<I")
    if version not in (2, 3):
        raise GGUFFormatError(f"GGUF version {version} (llama.cpp reads 2 and 3)")
    n_tensors = r.count("<Q", 8)
    metadata, arrays, alignment = _read_metadata(r, r.count("<Q", 12))
    tensors = tuple(_tensor_info(r) for _ in range(n_tensors))
    data_start = -(-r.pos // alignment) * alignment
    size = data_start + max((t.offset + t.n_bytes for t in tensors), default=0)
    return GGUFLayout(metadata, frozenset(arrays), tensors, data_start, size)


def _read_metadata(r: _Reader, n_keys: int) -> tuple[dict[str, Any], list[str], int]:
    """The scalar and string values by key, the keys of arrays, and the tensor data's alignment."""
    metadata: dict[str, Any] = {}
    arrays: list[str] = []
    alignment = DEFAULT_ALIGNMENT
    for _ in range(n_keys):
        key = r.string()
        (kind,) = r.take("<I")
        if key == _ALIGNMENT_KEY and kind == _UINT32:
            (alignment,) = r.take("<I")
            if alignment == 0 or alignment & (alignment - 1):
                raise GGUFFormatError(f"alignment {alignment} is not a power of two")
        elif kind in _SCALAR_FORMATS:
            (metadata[key.decode("utf-8", "replace")],) = r.take(_SCALAR_FORMATS[kind])
        elif kind == _STRING:
            metadata[key.decode("utf-8", "replace")] = r.string().decode("utf-8", "replace")
        else:
            if kind == _ARRAY:
                arrays.append(key.decode("utf-8", "replace"))
            _skip_value(r, kind)
    return metadata, arrays, alignment


def _skip_value(r: _Reader, kind: int) -> None:
    if kind in _SCALAR_SIZES:
        r.skip(_SCALAR_SIZES[kind])
    elif kind == _STRING:
        r.string()
    elif kind == _ARRAY:
        (item,) = r.take("<I")
        if item in _SCALAR_SIZES:
            r.skip(_SCALAR_SIZES[item] * r.count("<Q", _SCALAR_SIZES[item]))
        else:
            for _ in range(r.count("<Q", 8)):
                _skip_value(r, item)
    else:
        raise GGUFFormatError(f"unknown metadata type {kind}")


def _tensor_info(r: _Reader) -> TensorInfo:
    name = r.string().decode("utf-8", "replace")
    (n_dims,) = r.take("<I")
    if n_dims > _MAX_DIMS:
        raise GGUFFormatError(f"a tensor of {n_dims} dimensions")
    dims = r.take(f"<{n_dims}Q")
    elements = 1
    for dim in dims:
        elements *= dim
    kind, offset = r.take("<IQ")
    per_block, block_bytes = _BLOCKS.get(kind, (elements or 1, 1))
    return TensorInfo(
        name, tuple(dims), kind, offset, -(-elements // per_block) * block_bytes, elements
    )
