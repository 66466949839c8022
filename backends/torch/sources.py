"""Where a torch model comes from: a GGUF file (its tensors, and llama.cpp's vocabulary for the tokenizer) or a
Hugging Face folder (hf_folder.py's safetensors under the GGUF names, and transformers' tokenizer)."""

from __future__ import annotations

from pathlib import Path

import torch

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.hf_folder import HFWeights
from edgereason.backends.torch.tokenizer import HFTokenizer, Tokenizer
from edgereason.backends.torch.weights_cache import CACHED_DTYPES, CachedWeights


def open_weights(path: Path, dtype: torch.dtype | None = None) -> Weights | HFWeights | CachedWeights:
    """The tensors by their GGUF names, with `config()`, `n_elements()` and `permuted_rope`; a GGUF's read through
    its kept dequantized copy where `dtype` is one that is kept (weights_cache.py)."""
    if path.is_dir():
        return HFWeights(path)
    weights = Weights(path)
    return CachedWeights(weights, dtype) if dtype in CACHED_DTYPES else weights


def open_tokenizer(path: Path) -> Tokenizer:
    """A Hugging Face folder's tokenizer, or a GGUF's vocabulary (llama.cpp's, without the weights)."""
    if path.is_dir():
        return HFTokenizer(path)
    from edgereason.backends.llamacpp.model import load_vocab

    return load_vocab(str(path))


def display_name(path: Path) -> str:
    """A folder by its name (a dot in it is not a suffix), a file by its stem."""
    return path.name if path.is_dir() else path.stem
