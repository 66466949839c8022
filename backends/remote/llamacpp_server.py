"""`python -m edgereason.backends.remote.llamacpp_server ARGS`: llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server ARGS`, its `server` extra) with the weight-layout guard of the llama.cpp backend.

ggml repacks weights for Intel AMX where the CPU advertises it, and its AMX matmul dies with a general protection
fault on VMs that advertise AMX without enabling it; the stock server then dies on its first completion. Here the
weights keep their plain layout on such CPUs, as `edgereason.backends.llamacpp.model.LlamaModel` does.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as L

from edgereason.backends.llamacpp.model import _cpu_advertises_amx

_default_params = L.llama_model_default_params


def _guarded_params():  # type: ignore[no-untyped-def]
    params = _default_params()
    params.use_extra_bufts = not _cpu_advertises_amx()
    return params


def main() -> None:
    L.llama_model_default_params = _guarded_params  # llama_cpp.Llama reads it through the module
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
