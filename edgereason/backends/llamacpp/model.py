"""A GGUF model through llama-cpp-python's low-level API: the weights (`LlamaModel`, shared by the
roles that name the same file) over the file's vocabulary (backends/llama_vocab.py, which also sets
the library up). Contexts over a model are in runtime.py.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import llama_cpp.llama_cpp as L

from edgereason.backends.llama_vocab import LlamaVocab
from edgereason.config import physical_cores  # noqa: F401  (the backend's callers read it here)
from edgereason.errors import ModelError
from edgereason.util import interrupts
from edgereason.util.startup import phase


class LlamaModel(LlamaVocab):
    """Weights loaded once; the generator and verifier roles may share one instance."""

    def __init__(self, path: Path, n_gpu_layers: int = 0) -> None:
        super().__init__(path, n_gpu_layers, vocab_only=False)
        self._adapters: dict[Path, int] = {}
        self.n_embd = L.llama_model_n_embd(self.ptr)
        self.n_layer = n_layer = L.llama_model_n_layer(self.ptr)
        n_head = L.llama_model_n_head(self.ptr)
        n_head_kv = L.llama_model_n_head_kv(self.ptr)
        head_dim = self.n_embd // max(1, n_head)
        # K and V, f16 (2 bytes), every layer: the bytes one token occupies in the KV cache
        self.kv_bytes_per_token = 2 * 2 * n_layer * n_head_kv * head_dim
        self.weights_bytes = L.llama_model_size(self.ptr)

    def lora(self, path: Path) -> int:
        """A LoRA adapter of these weights (a pointer, loaded once; llama.cpp frees it with the
        model), or one ModelError line when the file is not an adapter for them."""
        path = Path(path)
        if path not in self._adapters:
            with interrupts.deferred():
                ptr = L.llama_adapter_lora_init(self.ptr, str(path).encode())
            if not ptr:
                raise ModelError(
                    f"llama.cpp could not load {path.name} as a LoRA adapter of {self.path.name}: "
                    "corrupt, or made for other weights; export the head again"
                )
            self._adapters[path] = ptr
        return self._adapters[path]


@lru_cache(maxsize=4)
@phase("weights")
def load_model(path: str, n_gpu_layers: int = 0) -> LlamaModel:
    """One LlamaModel per file: the two roles share weights when they name the same GGUF."""
    return LlamaModel(Path(path), n_gpu_layers)
