"""A GGUF's vocabulary through llama.cpp's library, for any backend: the library's one-time set-up
(its log and load-progress callbacks) and `LlamaVocab`, a file's tokenizer, chat template and
trained context. `load_vocab` reads them without the weights: the remote backend tokenizes with it,
and the torch backend reads a GGUF's tokenizer here, so every backend tokenizes a GGUF as llama.cpp
does. The llama.cpp backend's LlamaModel is a LlamaVocab with the weights (llamacpp/model.py).

It imports llama-cpp-python: a backend that runs without it imports this module only to open a
GGUF's vocabulary.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import llama_cpp.llama_cpp as L

from edgereason.backends.cpu_features import cpu_advertises_amx
from edgereason.errors import ModelError
from edgereason.prompts import LITERAL_START, literal_spans
from edgereason.util import interrupts

# module-level: must outlive every call
_silenced_cb = L.llama_log_callback(lambda level, text, user_data: None)
# a model load goes on while this returns true; module-level for the same reason
_go_on_loading = L.llama_progress_callback(lambda progress, user_data: not interrupts.requested())
_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    if not _backend_ready:
        L.llama_log_set(_silenced_cb, ctypes.c_void_p(0))
        L.llama_backend_init()
        _backend_ready = True


class LlamaVocab:
    """A GGUF loaded through llama.cpp: its tokenizer, chat template and trained context."""

    def __init__(self, path: Path, n_gpu_layers: int = 0, vocab_only: bool = True) -> None:
        """vocab_only: without the weights (LlamaModel loads them: vocab_only=False)."""
        _init_backend()
        params = L.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        params.use_extra_bufts = not cpu_advertises_amx()  # no AMX repacking: cpu_features.py
        self.path = Path(path)
        params.progress_callback = _go_on_loading
        # Ctrl-C ends the load through the progress callback, then is raised
        with interrupts.deferred():
            self.ptr = L.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.ptr:
            raise ModelError(
                f"llama.cpp could not load {self.path}: the file is corrupt, truncated or of an "
                "unsupported architecture; pull it again or pick another model"
            )
        self.vocab = L.llama_model_get_vocab(self.ptr)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.n_ctx_train = L.llama_model_n_ctx_train(self.ptr)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self.eog_ids = frozenset(
            t for t in range(self.n_vocab) if L.llama_vocab_is_eog(self.vocab, t)
        )
        self.control_ids = frozenset(
            t
            for t in range(self.n_vocab)
            if L.llama_vocab_get_attr(self.vocab, t) & L.LLAMA_TOKEN_ATTR_CONTROL
        )
        self._template = L.llama_model_chat_template(self.ptr, None)
        self._pieces: dict[int, bytes] = {}
        # llama.cpp aborts on layer hyperparameters of a vocab-only model; metadata still reads
        if vocab_only:
            arch = self._meta("general.architecture")
            self.n_ctx_train = int(self._meta(f"{arch}.context_length") or 0)

    def tokenize(self, text: str, add_bos: bool = False, special: bool = True) -> list[int]:
        """special: parse control-token text ("<|im_end|>") as control tokens, except in a literal
        span of the text (edgereason.prompts.literal: the problem, a step), whose text stays
        text."""
        if LITERAL_START not in text:
            return self._tokenize(text, add_bos, special)
        ids = self._tokenize("", True, False) if add_bos else []
        for piece, is_literal in literal_spans(text):
            ids += self._tokenize(piece, False, special and not is_literal)
        return ids

    def _tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_bos, special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_bos, special)
        return list(buf[:n])

    def _meta(self, key: str) -> str:
        buf = ctypes.create_string_buffer(256)
        n = L.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode() if n >= 0 else ""

    def token_piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            piece = self._pieces[token] = buf.raw[:n]
        return piece

    def detokenize(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_piece(t) for t in ids).decode("utf-8", errors="replace")

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], add_assistant: bool = True
    ) -> str:
        if not self._template:
            raise ModelError(
                f"{self.path.name} has no chat template; EdgeReason needs an instruct model"
            )
        msgs = (L.llama_chat_message * len(messages))()
        keep = []  # the encoded strings must stay alive during the call
        for i, m in enumerate(messages):
            role, content = m["role"].encode(), m["content"].encode()
            keep += [role, content]
            msgs[i].role, msgs[i].content = role, content
        cap = 4 * sum(len(x) for x in keep) + 1024
        buf = ctypes.create_string_buffer(cap)
        n = L.llama_chat_apply_template(
            self._template, msgs, len(messages), add_assistant, buf, cap
        )
        if n > cap:
            buf = ctypes.create_string_buffer(n)
            n = L.llama_chat_apply_template(
                self._template, msgs, len(messages), add_assistant, buf, n
            )
        if n < 0:
            raise ModelError(f"llama.cpp does not know the chat template of {self.path.name}")
        return buf.raw[:n].decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.ptr:
            L.llama_model_free(self.ptr)
            self.ptr = None


@lru_cache(maxsize=4)
def load_vocab(path: str) -> LlamaVocab:
    """A GGUF's tokenizer and chat template alone (no weights): what tokenizing here needs."""
    return LlamaVocab(Path(path))
