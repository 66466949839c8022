"""The Verifier protocol on torch + transformers, with per-path KV reuse like the llama.cpp verifier.

A held path keeps its own DynamicCache (the head, then one segment per step), its tokens' segment ends (`ends[0]`
after the head, `ends[k]` after step k) and its step scores. A request whose `prefix_key` names a held path copies
that path's cache cut back to the shared steps and evaluates only the new segments; a first step's request names
its question's root, whose head is evaluated once and held under the root's key. Caches are not shared between
paths (a fork copies the prefix), so a held path costs all of its tokens: `kv_used_tokens` is their sum and held
paths are dropped least-recently-used first when a call needs room. Requests run one forward pass each.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from edgereason.backends.transformers.formats import PathTokens
from edgereason.backends.transformers.loader import Checkpoint, import_torch
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats


@dataclass
class _Held:
    cache: Any  # DynamicCache holding exactly ends[-1] tokens
    ends: list[int]  # cache length after the head (index 0) and after each step's segment
    scores: list[float]  # one per step


class TorchVerifier:
    def __init__(self, checkpoint: Checkpoint, fmt: str, tokens: PathTokens, kv_tokens: int,
                 kv_bytes_per_token: int) -> None:
        self.checkpoint = checkpoint
        self.fmt = fmt
        self.tokens = tokens
        self.name = f"{checkpoint.path.name}:{fmt}"
        self._capacity = kv_tokens
        self._bytes_per_token = kv_bytes_per_token
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self.stats = VerifierStats()
        self._torch = import_torch()

    @property
    def kv_capacity_tokens(self) -> int:
        return self._capacity

    @property
    def kv_used_tokens(self) -> int:
        return sum(h.ends[-1] for h in self._held.values())

    @property
    def kv_bytes_per_token(self) -> int:
        return self._bytes_per_token

    def check_integrity(self) -> None:
        assert self.kv_used_tokens <= self._capacity
        for h in self._held.values():
            assert h.cache.get_seq_length() == h.ends[-1] and len(h.ends) == len(h.scores) + 1

    def release(self, key_prefix: str) -> None:
        for key in [k for k in self._held if k.startswith(key_prefix)]:
            del self._held[key]

    def close(self) -> None:
        self._held.clear()

    def _make_room(self, n_tokens: int, protect: set[str]) -> None:
        """Drop least-recently-used held paths outside `protect` until n_tokens more fit."""
        for key in list(self._held):
            if self.kv_used_tokens + n_tokens <= self._capacity:
                return
            if key not in protect:
                del self._held[key]
        if self.kv_used_tokens + n_tokens > self._capacity:
            raise OutOfMemoryError(f"the PRM needs {n_tokens} KV tokens for one path but has "
                                   f"{self._capacity - self.kv_used_tokens} free of {self._capacity}; "
                                   "give the verifier a larger KV share")

    def _fork(self, held: _Held, n_tokens: int) -> Any:
        """A new cache holding the first n_tokens of `held`'s (which stays as it is)."""
        from transformers import DynamicCache

        data = [(layer.keys[..., :n_tokens, :], layer.values[..., :n_tokens, :]) for layer in held.cache.layers]
        return DynamicCache(data, config=self.checkpoint.config)

    def _run(self, cache: Any, tokens: list[int], positions: list[int]) -> list[float]:
        """Append `tokens` to `cache` in one forward pass; the readout at `positions` (indices into tokens)."""
        if not tokens:
            return []
        ids = self._torch.tensor([tokens], dtype=self._torch.long, device=self.checkpoint.device)
        out = self.checkpoint.backbone(input_ids=ids, cache=cache, use_cache=True)
        return self.checkpoint.readout(out.last_hidden_state[0, positions]) if positions else []

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        t0 = time.perf_counter()
        heads = 0
        results = []
        with self._torch.inference_mode():
            for i, req in enumerate(requests):
                protect = {r.prefix_key for r in requests[i:] if r.prefix_key}
                if req.prefix_key and req.prefix_steps == 0 and req.prefix_key not in self._held:
                    heads += self._hold_head(req, protect)
                results.append(self._score_one(req, protect))
        total = heads + sum(r.new_tokens for r in results)
        self.stats.calls += 1
        self.stats.tokens += total
        self.stats.seconds += time.perf_counter() - t0
        self.stats.per_call_tokens.append(total)
        self.stats.peak_tokens = max(self.stats.peak_tokens, self.kv_used_tokens)
        return results

    def _hold_head(self, req: ScoreRequest, protect: set[str]) -> int:
        """Evaluate and hold a new question's head under the request's root key; returns its tokens."""
        from transformers import DynamicCache

        head = self.tokens.head(req.question)
        self._make_room(len(head), protect)
        cache = DynamicCache(config=self.checkpoint.config)
        self._run(cache, head, [])
        self._held[req.prefix_key] = _Held(cache, [len(head)], [])
        return len(head)

    def _score_one(self, req: ScoreRequest, protect: set[str]) -> ScoreResult:
        from transformers import DynamicCache

        base = self._held.get(req.prefix_key) if req.prefix_key else None
        shared = min(req.prefix_steps, len(base.ends) - 1) if base else 0
        head = [] if base else self.tokens.head(req.question)
        segs = self.tokens.segments(req.steps, shared)
        flat = head + [t for seg in segs for t in seg]
        if base is None and req.prefix_key:
            self.stats.rebuilt_tokens += len(flat)
        start = base.ends[shared] if base else 0
        ends = base.ends[:shared + 1] if base else [len(head)]
        for seg in segs:
            ends.append(ends[-1] + len(seg))
        old = self._held.pop(req.key, None)  # replaced below; its room is free for this path
        try:
            self._make_room(ends[-1], protect)
        except OutOfMemoryError:
            if old is not None:
                self._held[req.key] = old
            raise
        cache = self._fork(base, start) if base else DynamicCache(config=self.checkpoint.config)
        read_at = [e - 1 - start for e in ends[1 + shared:]]  # each new step's last token, within `flat`
        scores = (base.scores[:shared] if base else []) + self._run(cache, flat, read_at)
        self._held[req.key] = _Held(cache, ends, scores)
        if req.prefix_key in self._held:  # a used prefix is recent
            self._held.move_to_end(req.prefix_key)
        return ScoreResult([scores[i] for i in req.need], len(flat))
