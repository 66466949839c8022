"""The check that tells a llama.cpp CUDA build carrying its own C++ runtime (issue 13's crashes)
from a clean one, on real shared libraries: a small C++ library built here the two ways CMake can
link it, and the installed llama.cpp itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from edgereason.backends import cxx_runtime
from edgereason.errors import ConfigError

SOURCE = """#include <locale>
#include <sstream>
extern "C" int digits(long v) {
    std::ostringstream s; s.imbue(std::locale::classic()); s << v; return s.str().size();
}
"""


def _build(tmp_path: Path, name: str, *flags: str) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the probe libraries")
    src = tmp_path / "probe.cpp"
    src.write_text(SOURCE)
    out = tmp_path / f"lib{name}.so"
    subprocess.run(["g++", "-shared", "-fPIC", *flags, "-o", str(out), str(src)], check=True)
    return out


def test_a_library_with_libstdcxx_linked_in_and_exported_is_caught(tmp_path):
    private = _build(tmp_path, "private", "-static-libstdc++")
    assert cxx_runtime.carries_cxx_runtime(private)
    assert cxx_runtime.defining_library(private, cxx_runtime.PROBE) == private


def test_libraries_on_the_system_runtime_pass(tmp_path):
    # the fixed build's flags
    hidden = _build(tmp_path, "hidden", "-static-libstdc++", "-Wl,--exclude-libs,ALL")
    shared = _build(tmp_path, "shared")
    for library in (hidden, shared):
        assert not cxx_runtime.carries_cxx_runtime(library)
    found = cxx_runtime.defining_library(shared, cxx_runtime.PROBE)
    assert found is not None and found.name.startswith("libstdc++")


def test_the_installed_llama_cpp_uses_one_runtime():
    import llama_cpp.llama_cpp as L

    libllama = next((Path(L.__file__).parent / "lib").glob("libllama.so*"))
    assert not cxx_runtime.carries_cxx_runtime(libllama)
    cxx_runtime.private_cxx_runtime.cache_clear()
    # a CPU build, or a CUDA build made as the README says
    assert cxx_runtime.private_cxx_runtime() is None
    cxx_runtime.require_one_cxx_runtime("a test loads nothing", "nothing")


def test_a_private_runtime_is_refused_with_the_rebuild_command(monkeypatch, tmp_path):
    monkeypatch.setattr(cxx_runtime, "private_cxx_runtime", lambda: tmp_path / "libggml-cuda.so.0")
    with pytest.raises(ConfigError) as e:
        cxx_runtime.require_one_cxx_runtime("bench's plots load matplotlib", "pass --no-plots")
    assert "-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared" in str(e.value) and "--no-plots" in str(e.value)
