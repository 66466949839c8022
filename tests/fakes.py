"""A small deterministic backend for scheduler and selection unit tests (never the only test of a
feature).

Tokens: 0 = EOS, 1 = "\\n\\n", 2.. = single letters. A sequence's next-token distribution depends
only on its length, so equal prefixes give equal distributions, like a real model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.backends.host_sampling import sample
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry, ScoreRequest, ScoreResult, VerifierStats

VOCAB = 12


class FakeGenerator:
    name = "fake"
    eos_ids = frozenset({0})

    def __init__(self, capacity: int = 100_000, step_len: int = 4) -> None:
        self.capacity = capacity
        self.step_len = step_len
        self.seqs: dict[int, list[int]] = {}  # seq -> KV cell ids; a fork shares its parent's cells
        self.tokens: dict[int, int] = {}  # cell -> token
        self._next = 0
        self._cell = 0

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return [2 + (ord(c) % (VOCAB - 2)) for c in text[:8]]

    def detokenize(self, ids: Sequence[int]) -> str:
        return b"".join(self.token_piece(t) for t in ids).decode()

    def token_piece(self, token: int) -> bytes:
        return b"\n\n" if token == 1 else (b"" if token == 0 else bytes([ord("a") + token]))

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return "".join(m["content"] for m in messages)

    def new_seq(self) -> int:
        self._next += 1
        self.seqs[self._next] = []
        return self._next

    def fork(self, parent: int) -> int:
        child = self.new_seq()
        self.seqs[child] = list(self.seqs[parent])
        return child

    def free(self, seq: int) -> None:
        del self.seqs[seq]

    def truncate(self, seq: int, n_tokens: int) -> None:
        del self.seqs[seq][n_tokens:]

    def seq_len(self, seq: int) -> int:
        return len(self.seqs[seq])

    def unique_tokens(self, seq: int) -> int:
        others = {c for s, cells in self.seqs.items() if s != seq for c in cells}
        return sum(1 for c in self.seqs[seq] if c not in others)

    def can_append(self, n: int) -> bool:
        return self.kv_used_tokens + n <= self.capacity

    def free_seq_slots(self) -> int:
        return 256 - len(self.seqs)

    def live_seqs(self) -> int:
        return len(self.seqs)

    def check_integrity(self) -> None:
        assert self.kv_used_tokens <= self.capacity

    @property
    def max_batch_tokens(self) -> int:
        return 2048

    @property
    def context_length(self) -> int:
        return 8192

    @property
    def kv_capacity_tokens(self) -> int:
        return self.capacity

    @property
    def kv_used_tokens(self) -> int:
        return len({c for cells in self.seqs.values() for c in cells})  # forks share cells

    @property
    def kv_bytes_per_token(self) -> int:
        return 1

    def logits(self, seq: list[int]) -> np.ndarray:
        n = len(seq)
        out = np.zeros(VOCAB, dtype=np.float32)
        out[1] = 2.5 if n % self.step_len == 0 else -5.0  # steps end every few tokens
        out[0] = 1.0 if n > 60 else -9.0
        # depends on content: diverged paths differ
        out[2 + (n + sum(seq[-3:])) % (VOCAB - 2)] = 1.5
        return out

    def step(
        self, batch: Sequence[BatchEntry], samples: Sequence[int], sampling
    ) -> list[list[int]]:
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        out = []
        if self.kv_used_tokens + sum(len(e.tokens) for e in batch) > self.capacity:
            raise AssertionError("the engine overfilled the KV cache")
        for entry, n, p in zip(batch, samples, params):
            cells = self.seqs[entry.seq]
            for tok in entry.tokens:
                self._cell += 1
                cells.append(self._cell)
                self.tokens[self._cell] = tok
            history = [self.tokens[c] for c in cells]
            out.append(sample(self.logits(history), n, p))
        return out


class FakeVerifier:
    """Scores a step by a stable hash of its text, or by a table given per step text."""

    name = "fake-prm"

    def __init__(self, table: dict[str, float] | None = None) -> None:
        self.table = table or {}
        self.calls: list[int] = []
        self.stats = VerifierStats()

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        self.calls.append(len(requests))
        out = []
        for r in requests:
            scores = [
                self.table.get(r.steps[i], (sum(map(ord, r.steps[i])) % 97) / 97) for i in r.need
            ]
            out.append(ScoreResult(scores, sum(len(r.steps[i]) for i in r.need)))
        return out

    def release(self, key_prefix: str) -> None:
        pass

    def check_integrity(self) -> None:
        pass

    kv_capacity_tokens = 100_000
    kv_used_tokens = 0
    kv_bytes_per_token = 1
