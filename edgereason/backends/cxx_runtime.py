"""Whether the installed llama-cpp-python build carries a private copy of the C++ runtime (issue
13's crashes).

CMake links CUDA code with the static CUDA runtime unless told otherwise, and in the CUDA builds
seen on the GPU machine (CUDA 13, GCC 13) that put libstdc++'s own internals (std::locale's
implementation among them) into libggml-cuda.so, exported. The process then runs two C++ runtimes
whose objects cross between them: loading a model after numpy segfaults, so does matplotlib's Agg
backend after llama.cpp, and importing torch aborts with `free(): invalid pointer`. A build with the
shared CUDA runtime and the static archives' symbols kept private (REBUILD) uses the system's one
libstdc++ and none of those crash (benchmarks/cuda_triage.py, the README's GPU section). This module
tells the two builds apart so the commands that load such libraries can refuse with the rebuild
command instead of crashing. Shared by the backends: torch's and transformers' load torch."""

from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

from edgereason.errors import ConfigError

PROBE = "_ZNSt6locale5_ImplD1Ev"  # std::locale::_Impl::~_Impl(): only libstdc++ itself defines it
# the one CUDA install command every message gives (the README's GPU section has it too)
REBUILD = (
    'CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared '
    '-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--exclude-libs,ALL" '
    "pip install --force-reinstall --no-cache-dir llama-cpp-python==0.3.36"
)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def defining_library(library: Path, symbol: str) -> Path | None:
    """The file whose definition of `symbol` a lookup through `library` finds (the library first,
    then what it links), or None where none of them defines it."""
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(str(library)), symbol), ctypes.c_void_p).value
    except AttributeError:
        return None
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not libc.dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return Path(info.dli_fname.decode())


def carries_cxx_runtime(library: Path) -> bool:
    """`library` defines libstdc++'s internals itself instead of using the system's libstdc++."""
    found = defining_library(library, PROBE)
    return found is not None and found.resolve() == library.resolve()


@lru_cache(maxsize=1)
def private_cxx_runtime() -> Path | None:
    """libggml-cuda of the installed llama-cpp-python where it carries its own C++ runtime; None for
    a CPU build, for a CUDA build that uses the system's libstdc++, and without llama-cpp-python."""
    try:
        import llama_cpp.llama_cpp as L
    except ImportError:  # no llama.cpp library in the process: nothing to clash with
        return None

    cuda = sorted((Path(L.__file__).parent / "lib").glob("libggml-cuda.so*"))
    return cuda[0] if cuda and carries_cxx_runtime(cuda[0]) else None


def require_one_cxx_runtime(what: str, instead: str) -> None:
    """ConfigError, before anything is lost, where `what` (e.g. "bench's plots load matplotlib")
    would crash beside this build; `instead` says what the user can do short of rebuilding."""
    if (library := private_cxx_runtime()) is not None:
        raise ConfigError(
            f"{what}, which crashes beside this llama-cpp-python CUDA build ({library.name} "
            f"carries its own C++ runtime); rebuild it: {REBUILD}; or {instead}"
        )
