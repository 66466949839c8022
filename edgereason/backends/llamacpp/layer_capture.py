"""Hidden states of chosen layers, read during llama_decode through the scheduler's eval callback
(cb_eval).

llama.cpp names each layer's output "l_out-<il>", [n_embd, tokens of the ubatch]. The callback
answers "yes" when asked about those tensors and copies them when they are computed; a batch longer
than n_ubatch is computed as several ubatches, each firing the callback, and with a unified KV cache
llama.cpp splits a batch into ubatches in batch order (split_simple), so their rows, concatenated,
are the batch's rows. The last layer is computed only for output rows, so it is not offered: the
logits (a full-rank image of its normed output) carry it.

Tensors are read through ggml's own functions (name, size, copy), not its struct layout.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import llama_cpp.llama_cpp as L
import numpy as np


def _ggml() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_nbytes.argtypes = [ctypes.c_void_p]
    lib.ggml_nbytes.restype = ctypes.c_size_t
    lib.ggml_nelements.argtypes = [ctypes.c_void_p]
    lib.ggml_nelements.restype = ctypes.c_int64
    lib.ggml_backend_tensor_get.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    lib.ggml_backend_tensor_get.restype = None
    return lib


class LayerCapture:
    """Rules: attach() before llama_init_from_model; begin(n) before each llama_decode of n tokens;
    after it, at(i) selects batch index i and current() is the captured layers' hidden states there,
    [len(layers), n_embd] float32 (a view, valid until the next begin)."""

    def __init__(self, n_embd: int, n_layer: int, layers: Sequence[int]) -> None:
        if not layers or any(not 0 <= il < n_layer - 1 for il in layers):
            raise ValueError(
                f"layers must be in 0..{n_layer - 2} (the last is computed for output rows only), "
                f"got {list(layers)}"
            )
        self.n_embd = n_embd
        self.layers = list(layers)
        self._slot = {f"l_out-{il}".encode(): k for k, il in enumerate(self.layers)}
        self._lib = _ggml()
        self._parts: list[list[np.ndarray]] = [[] for _ in self.layers]
        self._rows: np.ndarray | None = None
        self._n_tokens = 0
        self._at = 0
        # an exception in the callback would end the graph's compute early, silently
        self._error = ""
        # kept: llama.cpp holds a pointer
        self._callback = L.ggml_backend_sched_eval_callback(self._on_tensor)

    def attach(self, params: L.llama_context_params) -> None:
        params.cb_eval = self._callback
        params.cb_eval_user_data = None

    def begin(self, n_tokens: int) -> None:
        self._parts = [[] for _ in self.layers]
        self._rows = None
        self._n_tokens = n_tokens
        self._error = ""

    def at(self, i: int) -> None:
        self._at = i

    def current(self) -> np.ndarray:
        if self._rows is None:
            self._rows = self._gather()
        return self._rows[self._at]

    def _gather(self) -> np.ndarray:
        if self._error:
            raise RuntimeError(self._error)
        layers = [
            np.concatenate(p) if p else np.empty((0, self.n_embd), np.float32) for p in self._parts
        ]
        if any(len(x) != self._n_tokens for x in layers):
            raise RuntimeError(
                f"layer capture saw {[len(x) for x in layers]} rows per layer for a batch of "
                f"{self._n_tokens} tokens"
            )
        return np.stack(layers, axis=1)

    def _on_tensor(self, tensor: int, ask: bool, _user: int) -> bool:
        slot = self._slot.get(self._lib.ggml_get_name(tensor))
        if slot is None:
            return False
        if ask:
            return True
        n = self._lib.ggml_nelements(tensor)
        nbytes = self._lib.ggml_nbytes(tensor)
        if nbytes != 4 * n or n % self.n_embd:
            rows = f"float32 rows of {self.n_embd}"
            self._error = f"layer output of {nbytes} bytes for {n} values is not {rows}"
            return True
        out = np.empty((n // self.n_embd, self.n_embd), dtype=np.float32)
        self._lib.ggml_backend_tensor_get(tensor, out.ctypes.data, 0, nbytes)
        self._parts[slot].append(out)
        return True
