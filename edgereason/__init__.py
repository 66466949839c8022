"""EdgeReason: PRM-guided test-time search with a generator and a verifier on one device."""

from edgereason.util import startup as _startup  # the start-up's clock: no numpy, no C++

# llama.cpp's library loads before numpy can: a CUDA build that carries its own C++ runtime
# (backends/cxx_runtime.py) crashed loading a model when numpy had loaded first.
try:
    with _startup.phase("import"):
        import llama_cpp.llama_cpp  # noqa: F401
except ImportError:  # not installed: the torch backend runs without it
    pass
except KeyboardInterrupt:
    # Ctrl-C during this import (about 0.3 s): the console script imports this package before any
    # code of ours can catch anything, and Ctrl-C is answered with exit 130, not a traceback
    # (edgereason/util/interrupts.py)
    raise SystemExit(130) from None

__version__ = "0.1.0"
