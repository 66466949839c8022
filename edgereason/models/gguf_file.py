"""A GGUF file's header, read without loading the model (util/gguf_layout.py reads it): how long the
file must be (a file cut short by a copy or download that stopped is found where its first bytes
look like any other GGUF), its scalar and string metadata, and how many values its tensors hold
(what a dequantized copy of the model takes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgereason.util.gguf_layout import GGUF_MAGIC, GGUFFormatError, read_layout

__all__ = ["GGUF_MAGIC", "GGUFFormatError", "GGUFHeader", "expected_size", "read_header"]


@dataclass(frozen=True)
class GGUFHeader:
    # the scalar and string values by key (arrays, the vocabulary among them, are skipped)
    metadata: dict[str, Any]
    n_elements: int  # the values all tensors hold
    data_start: int  # where the tensor data begins: the header's bytes, the vocabulary's included
    size: int  # the bytes a whole file has: its tensor data's end


def read_header(path: Path) -> GGUFHeader:
    """GGUFFormatError where the header cannot be read."""
    layout = read_layout(path)
    n_elements = sum(t.n_elements for t in layout.tensors)
    return GGUFHeader(layout.metadata, n_elements, layout.data_start, layout.size)


def expected_size(path: Path) -> int:
    """The bytes a whole file has. GGUFFormatError where the header cannot be read."""
    return read_layout(path).size
