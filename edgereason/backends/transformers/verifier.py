"""The Verifier protocol on torch + transformers, with per-path KV reuse like the llama.cpp
verifier.

A held path keeps its own DynamicCache (the head, then one segment per step), its tokens' segment
ends (`ends[0]` after the head, `ends[k]` after step k) and its step scores. A request whose
`prefix_key` names a held path copies that path's cache cut back to the shared steps and evaluates
only the new segments; a first step's request names its question's root, whose head is evaluated
once and held under the root's key. Caches are not shared between paths (a fork copies the prefix),
so a held path costs all of its tokens: `kv_used_tokens` is their sum and held paths are dropped
least-recently-used first when a call needs room.

Batching: a call's new question heads run in one forward pass, then its requests in as few passes as
their dependencies allow (a request naming a path made in this call, or re-scoring one, waits for
the next pass). A pass left-pads each row's held prefix and right-pads its new tokens, with a 2-D
attention mask over both and explicit positions, so every row sees exactly its own tokens; its
temporary batched cache is bounded by the KV capacity. Scores equal one-request-at-a-time scores up
to float rounding (the matmul shapes differ)."""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from edgereason.backends.transformers.batched_rows import (
    HeldPath,
    Row,
    fork_cache,
    forward_rows,
    padded_cells,
)
from edgereason.backends.transformers.formats import PathTokens
from edgereason.backends.transformers.loader import Checkpoint
from edgereason.backends.transformers.torch_device import import_torch
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats


class TorchVerifier:
    def __init__(
        self,
        checkpoint: Checkpoint,
        fmt: str,
        tokens: PathTokens,
        kv_tokens: int,
        kv_bytes_per_token: int,
    ) -> None:
        self.checkpoint = checkpoint
        self.fmt = fmt
        self.tokens = tokens
        self.name = f"{checkpoint.path.name}:{fmt}"
        # transformers renamed the forward's cache argument (past_key_values -> cache); a name the
        # forward does not take would be swallowed by its **kwargs and the prefix silently dropped
        params = inspect.signature(checkpoint.backbone.forward).parameters
        self._cache_kwarg = "past_key_values" if "past_key_values" in params else "cache"
        self._capacity = kv_tokens
        self._bytes_per_token = kv_bytes_per_token
        self._held: OrderedDict[str, HeldPath] = OrderedDict()
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
            raise OutOfMemoryError(
                f"the PRM needs {n_tokens} KV tokens for one path but has "
                f"{self._capacity - self.kv_used_tokens} free of {self._capacity}; "
                "give the verifier a larger KV share"
            )

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        t0 = time.perf_counter()
        with self._torch.inference_mode():
            heads = self._hold_heads(requests)
            results = self._score_batched(requests)
        total = heads + sum(r.new_tokens for r in results)
        self.stats.calls += 1
        self.stats.tokens += total
        self.stats.seconds += time.perf_counter() - t0
        self.stats.per_call_tokens.append(total)
        self.stats.peak_tokens = max(self.stats.peak_tokens, self.kv_used_tokens)
        return results

    def _hold_heads(self, requests: Sequence[ScoreRequest]) -> int:
        """Evaluate and hold the heads of new questions (a first step names its root) in one pass;
        their tokens."""
        roots: dict[str, str] = {}
        for r in requests:
            if r.prefix_key and r.prefix_steps == 0 and r.prefix_key not in self._held:
                roots.setdefault(r.prefix_key, r.question)
        heads = {key: self.tokens.head(q) for key, q in roots.items()}
        rows = [Row(key, None, None, 0, tokens, [], [len(tokens)]) for key, tokens in heads.items()]
        protect = {r.prefix_key for r in requests if r.prefix_key}
        self._run_waves(rows, protect)
        return sum(len(row.tokens) for row in rows)

    def _score_batched(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        rows = [self._plan(r) for r in requests]
        self._run_waves(rows, set(), requests)
        self.stats.rebuilt_tokens += sum(
            len(row.tokens) for r, row in zip(requests, rows) if r.prefix_key and row.base is None
        )
        return [
            ScoreResult([row.scores[i] for i in r.need], len(row.tokens))
            for r, row in zip(requests, rows)
        ]

    def _plan(self, req: ScoreRequest) -> Row:
        """The row scoring `req` on what is held now (a prefix made in this call is looked up again
        when its wave comes; see _run_waves)."""
        base = self._held.get(req.prefix_key) if req.prefix_key else None
        shared = min(req.prefix_steps, len(base.ends) - 1) if base else 0
        head = [] if base else self.tokens.head(req.question)
        segs = self.tokens.segments(req.steps, shared)
        start = base.ends[shared] if base else 0
        ends = base.ends[: shared + 1] if base else [len(head)]
        for seg in segs:
            ends.append(ends[-1] + len(seg))
        # each new step's last token, within the row's tokens
        read_at = [e - 1 - start for e in ends[1 + shared :]]
        scores = base.scores[:shared] if base else []
        tokens = head + [t for seg in segs for t in seg]
        return Row(req.key, req.prefix_key, base, start, tokens, read_at, ends, scores)

    def _run_waves(
        self, rows: list[Row], protect: set[str], requests: Sequence[ScoreRequest] | None = None
    ) -> None:
        """Run `rows` in order, as few forward passes as possible; each row ends held under its key.

        A wave closes before a row that depends on it (its prefix or its own key is a key of the
        wave; the row is then planned again on what the wave made), before a row that does not fit
        beside it in the KV capacity, and before its padded batch would outgrow the capacity. Never
        dropped to make room at row i: `protect` and the prefixes of requests[i:]. `requests[i]`
        made rows[i] (None for question heads, which depend on nothing)."""
        wave: list[Row] = []
        reserved = 0
        later = [set(protect)]  # later[j]: protect and the prefixes of requests[-j:]
        for r in reversed(requests or []):
            later.append(later[-1] | ({r.prefix_key} if r.prefix_key else set()))
        for i, row in enumerate(rows):
            req = requests[i] if requests is not None else None
            protect = later[len(rows) - i] if requests is not None else later[0]
            keys = {w.key for w in wave}
            if req is not None and (req.key in keys or req.prefix_key in keys):
                self._flush(wave)
                wave, reserved = [], 0
                row = rows[i] = self._plan(req)
            elif req is not None and row.base is None and req.prefix_key in self._held:
                # its prefix was made by an earlier wave of this call
                row = rows[i] = self._plan(req)
            old = self._held.pop(row.key, None)  # replaced by this row; its room is free for it
            if wave and (
                not self._fits(reserved + row.ends[-1], protect)
                or padded_cells(wave + [row]) > self._capacity
            ):
                self._flush(wave)
                wave, reserved = [], 0
            try:
                self._make_room(reserved + row.ends[-1], protect)
            except OutOfMemoryError:
                if old is not None:
                    self._held[row.key] = old
                raise
            wave.append(row)
            reserved += row.ends[-1]
        self._flush(wave)

    def prefill_pass(self, rows: list[list[int]]) -> None:
        """Run `rows` as new sequences from empty caches in one batched pass, a readout at each
        row's end, holding nothing: what the memory profiler times for the PRM's prefill curve."""
        with self._torch.inference_mode():
            self._forward_rows([Row("", None, None, 0, r, [len(r) - 1], [len(r)]) for r in rows])
        # a CUDA pass is queued, not done, until the device syncs
        if self.checkpoint.device.type == "cuda":
            self._torch.cuda.synchronize()

    def _fits(self, n_tokens: int, protect: set[str]) -> bool:
        """Whether n_tokens could be made free by dropping held paths outside `protect`."""
        pinned = sum(h.ends[-1] for k, h in self._held.items() if k in protect)
        return pinned + n_tokens <= self._capacity

    def _flush(self, rows: list[Row]) -> None:
        """One forward pass over `rows`; each row's cache, ends and scores are held under its
        key."""
        # a held path that already covers a request needs no pass
        run = [r for r in rows if r.tokens]
        caches, scores = self._forward_rows(run) if run else ([], [])
        done = dict(zip(map(id, run), zip(caches, scores)))
        for row in rows:
            cache, new = done.get(id(row)) or (fork_cache(self.checkpoint, row.base, row.start), [])
            row.scores = row.scores + new
            self._held[row.key] = HeldPath(cache, row.ends, row.scores)
            if row.base_key in self._held:  # a used prefix is recent
                self._held.move_to_end(row.base_key)

    def _forward_rows(self, rows: list[Row]) -> tuple[list[Any], list[list[float]]]:
        return forward_rows(self.checkpoint, self._torch, self._cache_kwarg, rows)
