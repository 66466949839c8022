"""llama-cpp-python's low-level API wrapped for the engine: one model, any number of contexts, and a context
that manages sequence ids with exact KV accounting (forks share cells, as llama.cpp's unified KV cache does).

The high-level `Llama` class evaluates only sequence 0 and cannot batch beams, so it is not used.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import llama_cpp.llama_cpp as L

from edgereason import interrupts
from edgereason.backends.llamacpp.device_sampling import Candidates, TopKSamplers
from edgereason.errors import ModelError, OutOfMemoryError

_silenced_cb = L.llama_log_callback(lambda level, text, user_data: None)  # module-level: must outlive every call
# a model load goes on while this returns true; module-level for the same reason
_go_on_loading = L.llama_progress_callback(lambda progress, user_data: not interrupts.requested())
_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    if not _backend_ready:
        L.llama_log_set(_silenced_cb, ctypes.c_void_p(0))
        L.llama_backend_init()
        _backend_ready = True


def physical_cores() -> int:
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:  # psutil is a dependency; this only guards odd installs
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def _cpu_advertises_amx() -> bool:
    try:
        return " amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: ggml's AMX code is Linux-only
        return False


class LlamaModel:
    """Weights loaded once; the generator and verifier roles may share one instance."""

    def __init__(self, path: Path, n_gpu_layers: int = 0, vocab_only: bool = False) -> None:
        """vocab_only: the tokenizer, chat template and trained context without the weights (a remote backend
        serves the weights; it tokenizes here)."""
        _init_backend()
        params = L.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        # ggml repacks weights for Intel AMX where the CPU advertises it, and its AMX matmul then dies with a
        # general protection fault on VMs that advertise AMX without enabling it (seen on a 2-core Xeon VM):
        # on such CPUs weights stay in their plain layout, which every CPU kernel reads.
        params.use_extra_bufts = not _cpu_advertises_amx()
        self.path = Path(path)
        params.progress_callback = _go_on_loading
        with interrupts.deferred():  # Ctrl-C ends the load through the progress callback, then is raised
            self.ptr = L.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.ptr:
            raise ModelError(f"llama.cpp could not load {self.path}: the file is corrupt, truncated or of an "
                             "unsupported architecture; pull it again or pick another model")
        self.vocab = L.llama_model_get_vocab(self.ptr)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.n_ctx_train = L.llama_model_n_ctx_train(self.ptr)
        self.n_embd = L.llama_model_n_embd(self.ptr)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self.eog_ids = frozenset(t for t in range(self.n_vocab) if L.llama_vocab_is_eog(self.vocab, t))
        self.control_ids = frozenset(t for t in range(self.n_vocab)
                                     if L.llama_vocab_get_attr(self.vocab, t) & L.LLAMA_TOKEN_ATTR_CONTROL)
        self._template = L.llama_model_chat_template(self.ptr, None)
        self._pieces: dict[int, bytes] = {}
        self.kv_bytes_per_token = self.weights_bytes = 0
        if vocab_only:  # llama.cpp aborts on layer hyperparameters of a vocab-only model; metadata still reads
            arch = self._meta("general.architecture")
            self.n_ctx_train = int(self._meta(f"{arch}.context_length") or 0)
            return
        n_layer = L.llama_model_n_layer(self.ptr)
        n_head = L.llama_model_n_head(self.ptr)
        n_head_kv = L.llama_model_n_head_kv(self.ptr)
        head_dim = L.llama_model_n_embd(self.ptr) // max(1, n_head)
        # K and V, f16 (2 bytes), every layer: the bytes one token occupies in the KV cache
        self.kv_bytes_per_token = 2 * 2 * n_layer * n_head_kv * head_dim
        self.weights_bytes = L.llama_model_size(self.ptr)

    def tokenize(self, text: str, add_bos: bool = False, special: bool = True) -> list[int]:
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

    def token_text(self, token: int) -> bytes:
        """The token's bytes with control tokens rendered (`<|im_start|>`): text a server re-tokenizes."""
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        return buf.raw[:n]

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

    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_assistant: bool = True) -> str:
        if not self._template:
            raise ModelError(f"{self.path.name} has no chat template; EdgeReason needs an instruct model")
        msgs = (L.llama_chat_message * len(messages))()
        keep = []  # the encoded strings must stay alive during the call
        for i, m in enumerate(messages):
            role, content = m["role"].encode(), m["content"].encode()
            keep += [role, content]
            msgs[i].role, msgs[i].content = role, content
        cap = 4 * sum(len(x) for x in keep) + 1024
        buf = ctypes.create_string_buffer(cap)
        n = L.llama_chat_apply_template(self._template, msgs, len(messages), add_assistant, buf, cap)
        if n > cap:
            buf = ctypes.create_string_buffer(n)
            n = L.llama_chat_apply_template(self._template, msgs, len(messages), add_assistant, buf, n)
        if n < 0:
            raise ModelError(f"llama.cpp does not know the chat template of {self.path.name}")
        return buf.raw[:n].decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.ptr:
            L.llama_model_free(self.ptr)
            self.ptr = None


@lru_cache(maxsize=4)
def load_model(path: str, n_gpu_layers: int = 0) -> LlamaModel:
    """One LlamaModel per file: the two roles share weights when they name the same GGUF."""
    return LlamaModel(Path(path), n_gpu_layers)


@lru_cache(maxsize=4)
def load_vocab(path: str) -> LlamaModel:
    """A GGUF's tokenizer and chat template alone (no weights): what a remote backend needs locally."""
    return LlamaModel(Path(path), vocab_only=True)


class DecodeItem(NamedTuple):
    seq: int
    tokens: Sequence[int]
    outputs: Sequence[tuple[int, object]]  # (offset into tokens, tag): rows whose next-token logits are wanted


class KVFullError(OutOfMemoryError):
    """The forward pass found no room in the KV cache (an out-of-memory error: the verifier's halving and the
    engine's handlers catch it)."""


@dataclass
class _Seq:
    cells: list[int]  # the KV cell ids this sequence attends to, in position order


class KVContext:
    """One llama_context with sequence-id management and exact KV accounting.

    Rules: ids come from a free list and return to it only on `free`; a fork shares every cell of its parent
    (llama_memory_seq_cp with a unified cache adds the new id to those cells, it copies nothing); a cell is in use
    while any sequence refers to it. `used_tokens` is the number of cells in use.
    """

    def __init__(self, model: LlamaModel, n_ctx: int, n_seq_max: int = 256, n_batch: int = 2048,
                 n_threads: int | None = None, flash_attn: bool = True, top_k: int = 0) -> None:
        params = L.llama_context_default_params()
        params.n_ctx = max(256, -(-n_ctx // 256) * 256)  # llama.cpp pads to 256 cells; the budget is ours
        params.n_batch = n_batch
        params.n_ubatch = min(512, n_batch)
        params.n_seq_max = n_seq_max
        params.kv_unified = True  # one cell pool for all sequences: forks share cells
        threads = n_threads or physical_cores()
        params.n_threads = params.n_threads_batch = threads
        params.no_perf = True
        # A unified cache makes every row attend over all cells in use, every sequence's. Without flash attention
        # that is a dense [n_kv x rows] product per head: with 6,000 cells in use SmolLM2 decodes 8 rows 3.6x
        # slower on CPU. Flash attention skips masked cells. Its price: logits depend slightly (~1e-3) on how
        # tokens are split into ubatches, so `flash_attn=False` is there for bit-exact incremental scoring.
        params.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.model = model
        # top_k > 0: the backend cuts each requested row to its k best logits in the graph, and decode hands
        # on_logits a Candidates (ids [k], logits [k]) instead of the vocabulary-sized row
        self.top_k = TopKSamplers(top_k, n_seq_max) if top_k else None
        if self.top_k:
            self.top_k.attach(params)
        with interrupts.deferred():  # llama.cpp logs through a Python callback while it builds the context
            self.ptr = L.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            if self.top_k:
                self.top_k.free()
            raise OutOfMemoryError(f"could not create a llama.cpp context of {n_ctx} KV tokens for "
                                   f"{model.path.name}; lower the KV budget")
        self.mem = L.llama_get_memory(self.ptr)
        self.capacity = min(n_ctx, L.llama_n_ctx(self.ptr))
        self.n_batch = L.llama_n_batch(self.ptr)
        self.n_seq_max = L.llama_n_seq_max(self.ptr)
        self._batch = L.llama_batch_init(self.n_batch, 0, 1)
        self._free_ids = list(range(self.n_seq_max - 1, -1, -1))
        self._seqs: dict[int, _Seq] = {}
        self._refs: dict[int, int] = {}
        self._next_cell = 0

    # -- sequence ids (check/act pairs: can_alloc/new_seq, can_append/decode) --
    def can_alloc(self, n: int = 1) -> bool:
        return len(self._free_ids) >= n

    def new_seq(self) -> int:
        if not self._free_ids:
            raise OutOfMemoryError(f"all {self.n_seq_max} sequence slots are in use; lower --beams")
        seq = self._free_ids.pop()
        self._seqs[seq] = _Seq([])
        return seq

    def fork(self, parent: int) -> int:
        child = self.new_seq()
        cells = list(self._seqs[parent].cells)
        self._seqs[child].cells = cells
        for c in cells:
            self._refs[c] += 1
        L.llama_memory_seq_cp(self.mem, parent, child, -1, -1)
        return child

    def truncate(self, seq: int, n_tokens: int) -> None:
        s = self._seqs[seq]
        if n_tokens >= len(s.cells):
            return
        L.llama_memory_seq_rm(self.mem, seq, n_tokens, -1)
        self._unref(s.cells[n_tokens:])
        del s.cells[n_tokens:]

    def free(self, seq: int) -> None:
        s = self._seqs.pop(seq)
        L.llama_memory_seq_rm(self.mem, seq, -1, -1)
        self._unref(s.cells)
        self._free_ids.append(seq)

    def _unref(self, cells: Iterable[int]) -> None:
        for c in cells:
            r = self._refs[c] - 1
            if r:
                self._refs[c] = r
            else:
                del self._refs[c]

    def seq_len(self, seq: int) -> int:
        return len(self._seqs[seq].cells)

    def unique_tokens(self, seq: int) -> int:
        """Cells only this sequence uses: what freeing it gives back."""
        return sum(1 for c in self._seqs[seq].cells if self._refs[c] == 1)

    @property
    def used_tokens(self) -> int:
        return len(self._refs)

    @property
    def live_seqs(self) -> int:
        return len(self._seqs)

    def can_append(self, n_new_tokens: int) -> bool:
        return self.used_tokens + n_new_tokens <= self.capacity

    def check_integrity(self) -> None:
        """Our accounting agrees with llama.cpp: each sequence's last position and the shared cell counts."""
        refs: dict[int, int] = {}
        for seq, s in self._seqs.items():
            for c in s.cells:
                refs[c] = refs.get(c, 0) + 1
            pos_max = L.llama_memory_seq_pos_max(self.mem, seq)
            assert pos_max == len(s.cells) - 1, f"seq {seq}: llama.cpp pos_max {pos_max} != {len(s.cells) - 1}"
        assert refs == self._refs, "KV cell reference counts drifted"
        assert self.used_tokens <= self.capacity
        assert not set(self._free_ids) & set(self._seqs), "a live sequence id is on the free list"

    # -- forward pass --
    def decode(self, items: Sequence[DecodeItem],
               on_logits: Callable[[object, np.ndarray | Candidates], None]) -> int:
        """Evaluate every item's tokens (one llama_decode per n_batch tokens; usually exactly one) and call
        on_logits(tag, row) for each requested row: logits [n_vocab], or Candidates (top_k ids and logits,
        copies) in a top-k context. An array row is only valid inside the callback."""
        total = sum(len(it.tokens) for it in items)
        if not self.can_append(total):
            raise KVFullError(f"{total} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use")
        flat: list[tuple[int, int, int, object]] = []  # (seq, token, position, tag or _NO_LOGITS)
        for it in items:
            start = len(self._seqs[it.seq].cells)
            want = dict(it.outputs)
            for off, tok in enumerate(it.tokens):
                flat.append((it.seq, tok, start + off, want.get(off, _NO_LOGITS)))
        b = self._batch
        for lo in range(0, len(flat), self.n_batch):
            window = flat[lo:lo + self.n_batch]
            rows: list[tuple[int, object]] = []
            for i, (seq, tok, pos, tag) in enumerate(window):
                b.token[i] = tok
                b.pos[i] = pos
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = seq
                wanted = tag is not _NO_LOGITS
                b.logits[i] = wanted
                if wanted:
                    rows.append((i, tag))
            b.n_tokens = len(window)
            rc = L.llama_decode(self.ptr, b)
            interrupts.check()  # a stop signal that landed in llama.cpp's log callback was dropped there
            if rc != 0:
                raise KVFullError(f"llama_decode failed (code {rc}) with {self.used_tokens}/{self.capacity} "
                                  "KV cells in use")
            for seq, _tok, _pos, _tag in window:
                cell = self._next_cell
                self._next_cell += 1
                self._seqs[seq].cells.append(cell)
                self._refs[cell] = 1
            for i, tag in rows:
                if self.top_k:
                    on_logits(tag, self.top_k.read(self.ptr, i))
                    continue
                ptr = L.llama_get_logits_ith(self.ptr, i)
                on_logits(tag, np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)))
        return total

    def close(self) -> None:
        if self.ptr:
            L.llama_batch_free(self._batch)
            L.llama_free(self.ptr)
            self.ptr = None
            if self.top_k:
                self.top_k.free()  # after the context: it used the chains until llama_free


_NO_LOGITS = object()


class KVMemoryOf:
    """The KV-memory properties of the protocols, for a role that owns `self.ctx` (a KVContext)."""

    ctx: KVContext

    @property
    def kv_capacity_tokens(self) -> int:
        return self.ctx.capacity

    @property
    def kv_used_tokens(self) -> int:
        return self.ctx.used_tokens

    @property
    def kv_bytes_per_token(self) -> int:
        return self.ctx.model.kv_bytes_per_token

