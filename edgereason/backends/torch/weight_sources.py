"""Where a torch model comes from: a GGUF file (its tensors, and llama.cpp's vocabulary for the
tokenizer) or a Hugging Face folder (hf_folder.py's safetensors under the GGUF names, and
transformers' tokenizer). Only a GGUF's tokenizer needs llama-cpp-python: a folder runs
without it."""

from __future__ import annotations

from pathlib import Path

import torch

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.hf_folder import HFWeights
from edgereason.backends.torch.tokenizer import HFTokenizer
from edgereason.backends.torch.weights_cache import CACHED_DTYPES, CachedWeights
from edgereason.backends.vocabulary import Tokenizer
from edgereason.errors import ConfigError


def open_weights(
    path: Path, dtype: torch.dtype | None = None
) -> Weights | HFWeights | CachedWeights:
    """The tensors by their GGUF names, with `config()`, `n_elements()`, `permuted_rope` and `gguf`;
    a GGUF's read through its kept dequantized copy where `dtype` is one that is kept
    (weights_cache.py)."""
    if path.is_dir():
        return HFWeights(path)
    weights = Weights(path)
    return CachedWeights(weights, dtype) if dtype in CACHED_DTYPES else weights


def open_tokenizer(path: Path) -> Tokenizer:
    """A Hugging Face folder's tokenizer, or a GGUF's vocabulary (llama.cpp's, without the
    weights)."""
    if path.is_dir():
        return HFTokenizer(path)
    try:
        from edgereason.backends.llama_vocab import load_vocab
    except ImportError:  # llama-cpp-python is not installed
        raise ConfigError(
            f"{path.name}: the torch backend reads a GGUF's tokenizer through llama-cpp-python, "
            "which is not installed; install it, or run a Hugging Face folder of the model "
            "(--model hf:FOLDER; edgereason models export NAME --format hf FOLDER writes one)"
        ) from None
    return load_vocab(str(path))


def display_name(path: Path) -> str:
    """A folder by its name (a dot in it is not a suffix), a file by its stem."""
    return path.name if path.is_dir() else path.stem
