"""What the CPU advertises, where a backend must work around it.

ggml repacks weights for Intel AMX where the CPU advertises it, and its AMX matmul then dies with a
general protection fault on VMs that advertise AMX without enabling it (seen on a 2-core Xeon VM).
Every load of a GGUF through llama.cpp's library (the llama.cpp backend's, a vocabulary's for torch
or a served role, the test server's) keeps the weights in their plain layout on such CPUs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def cpu_advertises_amx() -> bool:
    try:
        return " amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: ggml's AMX code is Linux-only
        return False
