"""What a value head takes from its backbone's GGUF: the file's sha256, which names the weights a
head was trained on, and the vocabulary tokens whose logits are the head's features
(value_head.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import numpy as np

from edgereason.util.cache_file import read_cache
from edgereason.util.files import write_text_atomic
from edgereason.util.schema import MapOf, Text

SHA256 = Text(pattern=r"[0-9a-f]{64}", name="a sha256 in hex")


def file_sha256(path: Path) -> str:
    """sha256 of a model file; remembered by (path, size, mtime) so a start-up hashes a GGUF once,
    not each time."""
    from edgereason import models

    path = Path(path).resolve()
    # registry files were checked by sha256 when they were pulled
    for spec in models.REGISTRY.values():
        if path == models.cache_path(spec).resolve() and path.is_file():
            return spec.sha256
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache = models.home() / "sha256.json"
    known = _read_known(cache)
    if key not in known:
        known[key] = models.sha256(path)
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache, json.dumps(known))
    return known[key]


def _read_known(cache: Path) -> dict[str, str]:
    """The remembered hashes; none where the file is missing, and none where it is damaged (said,
    naming the file: the hash made now writes it whole again)."""
    return cast(dict, read_cache(cache, MapOf(SHA256), "hashing the model again") or {})


def feature_tokens(n_vocab: int, n_embd: int, exclude: frozenset[int], seed: int = 0) -> np.ndarray:
    """2 * n_embd vocabulary ids drawn at random (sorted): random rows of the output matrix, twice
    as many as its columns, are well conditioned, so their logits determine the hidden state.
    Special tokens are left out."""
    ids = np.array([t for t in range(n_vocab) if t not in exclude])
    k = min(len(ids), 2 * n_embd)
    return np.sort(np.random.default_rng(seed).choice(ids, size=k, replace=False))
