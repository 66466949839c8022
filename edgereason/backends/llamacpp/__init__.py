"""llama.cpp backend: a Generator and a Verifier, sharing weights when both name one GGUF;
backend.py opens them behind the one interface (LlamaCppBackend)."""

from __future__ import annotations

from edgereason.backends.llamacpp.generator import LlamaGenerator
from edgereason.backends.llamacpp.model import LlamaModel, load_model, physical_cores
from edgereason.backends.llamacpp.profiler_probes import profiled_generator, profiled_prm
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS
from edgereason.backends.llamacpp.verifier import LlamaVerifier

__all__ = [
    "SEQ_SLOTS",
    "profiled_generator",
    "profiled_prm",
    "LlamaGenerator",
    "LlamaVerifier",
    "LlamaModel",
    "load_model",
    "physical_cores",
]
