"""The Verifier protocol on torch + transformers, with per-path KV reuse like the llama.cpp verifier.

A held path keeps its own DynamicCache (the head, then one segment per step), its tokens' segment ends (`ends[0]`
after the head, `ends[k]` after step k) and its step scores. A request whose `prefix_key` names a held path copies
that path's cache cut back to the shared steps and evaluates only the new segments; a first step's request names
its question's root, whose head is evaluated once and held under the root's key. Caches are not shared between
paths (a fork copies the prefix), so a held path costs all of its tokens: `kv_used_tokens` is their sum and held
paths are dropped least-recently-used first when a call needs room.

Batching: a call's new question heads run in one forward pass, then its requests in as few passes as their
dependencies allow (a request naming a path made in this call, or re-scoring one, waits for the next pass). A pass
left-pads each row's held prefix and right-pads its new tokens, with a 2-D attention mask over both and explicit
positions, so every row sees exactly its own tokens; its temporary batched cache is bounded by the KV capacity.
Scores equal one-request-at-a-time scores up to float rounding (the matmul shapes differ).
"""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from edgereason.backends.transformers.formats import PathTokens
from edgereason.backends.transformers.loader import Checkpoint, import_torch
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats


@dataclass
class _Held:
    cache: Any  # DynamicCache holding exactly ends[-1] tokens
    ends: list[int]  # cache length after the head (index 0) and after each step's segment
    scores: list[float]  # one per step


@dataclass
class _Row:
    """One row of a batched forward pass: `tokens` appended to the first `start` tokens of `base`'s cache."""

    key: str
    base_key: str | None  # the prefix the request named (made recent when the row runs)
    base: _Held | None
    start: int
    tokens: list[int]
    read_at: list[int]  # indices into tokens whose readout is wanted
    ends: list[int]
    scores: list[float] = field(default_factory=list)  # the base's for the shared steps, then the new ones


class TorchVerifier:
    def __init__(
        self, checkpoint: Checkpoint, fmt: str, tokens: PathTokens, kv_tokens: int, kv_bytes_per_token: int
    ) -> None:
        self.checkpoint = checkpoint
        self.fmt = fmt
        self.tokens = tokens
        self.name = f"{checkpoint.path.name}:{fmt}"
        # transformers renamed the forward's cache argument (past_key_values -> cache); a name the forward does not
        # take would be swallowed by its **kwargs and the prefix silently dropped
        params = inspect.signature(checkpoint.backbone.forward).parameters
        self._cache_kwarg = "past_key_values" if "past_key_values" in params else "cache"
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
        """Evaluate and hold the heads of new questions (a first step names its root) in one pass; their tokens."""
        roots: dict[str, str] = {}
        for r in requests:
            if r.prefix_key and r.prefix_steps == 0 and r.prefix_key not in self._held:
                roots.setdefault(r.prefix_key, r.question)
        heads = {key: self.tokens.head(q) for key, q in roots.items()}
        rows = [_Row(key, None, None, 0, tokens, [], [len(tokens)]) for key, tokens in heads.items()]
        protect = {r.prefix_key for r in requests if r.prefix_key}
        self._run_waves(rows, protect)
        return sum(len(row.tokens) for row in rows)

    def _score_batched(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        rows = [self._plan(r) for r in requests]
        self._run_waves(rows, set(), requests)
        self.stats.rebuilt_tokens += sum(
            len(row.tokens) for r, row in zip(requests, rows) if r.prefix_key and row.base is None
        )
        return [ScoreResult([row.scores[i] for i in r.need], len(row.tokens)) for r, row in zip(requests, rows)]

    def _plan(self, req: ScoreRequest) -> _Row:
        """The row scoring `req` on what is held now (a prefix made in this call is looked up again when its wave
        comes; see _run_waves)."""
        base = self._held.get(req.prefix_key) if req.prefix_key else None
        shared = min(req.prefix_steps, len(base.ends) - 1) if base else 0
        head = [] if base else self.tokens.head(req.question)
        segs = self.tokens.segments(req.steps, shared)
        start = base.ends[shared] if base else 0
        ends = base.ends[: shared + 1] if base else [len(head)]
        for seg in segs:
            ends.append(ends[-1] + len(seg))
        read_at = [e - 1 - start for e in ends[1 + shared :]]  # each new step's last token, within the row's tokens
        scores = base.scores[:shared] if base else []
        tokens = head + [t for seg in segs for t in seg]
        return _Row(req.key, req.prefix_key, base, start, tokens, read_at, ends, scores)

    def _run_waves(self, rows: list[_Row], protect: set[str], requests: Sequence[ScoreRequest] | None = None) -> None:
        """Run `rows` in order, as few forward passes as possible; each row ends held under its key.

        A wave closes before a row that depends on it (its prefix or its own key is a key of the wave; the row is
        then planned again on what the wave made), before a row that does not fit beside it in the KV capacity,
        and before its padded batch would outgrow the capacity. Never dropped to make room at row i: `protect` and
        the prefixes of requests[i:]. `requests[i]` made rows[i] (None for question heads, which depend on
        nothing)."""
        wave: list[_Row] = []
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
                row = rows[i] = self._plan(req)  # its prefix was made by an earlier wave of this call
            old = self._held.pop(row.key, None)  # replaced by this row; its room is free for it
            if wave and (
                not self._fits(reserved + row.ends[-1], protect) or self._padded(wave + [row]) > self._capacity
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
        """Run `rows` as new sequences from empty caches in one batched pass, a readout at each row's end, holding
        nothing: what the memory profiler times for the PRM's prefill curve."""
        with self._torch.inference_mode():
            self._forward([_Row("", None, None, 0, r, [len(r) - 1], [len(r)]) for r in rows])
        if self.checkpoint.device.type == "cuda":  # a CUDA pass is queued, not done, until the device syncs
            self._torch.cuda.synchronize()

    def _fits(self, n_tokens: int, protect: set[str]) -> bool:
        """Whether n_tokens could be made free by dropping held paths outside `protect`."""
        pinned = sum(h.ends[-1] for k, h in self._held.items() if k in protect)
        return pinned + n_tokens <= self._capacity

    @staticmethod
    def _padded(rows: list[_Row]) -> int:
        """KV cells of the batched cache a pass of `rows` builds (every row padded to the longest)."""
        return len(rows) * (max(r.start for r in rows) + max(len(r.tokens) for r in rows))

    def _flush(self, rows: list[_Row]) -> None:
        """One forward pass over `rows`; each row's cache, ends and scores are held under its key."""
        run = [r for r in rows if r.tokens]  # a held path that already covers a request needs no pass
        caches, scores = self._forward(run) if run else ([], [])
        done = dict(zip(map(id, run), zip(caches, scores)))
        for row in rows:
            cache, new = done.get(id(row)) or (self._fork(row.base, row.start), [])
            row.scores = row.scores + new
            self._held[row.key] = _Held(cache, row.ends, row.scores)
            if row.base_key in self._held:  # a used prefix is recent
                self._held.move_to_end(row.base_key)

    def _fork(self, held: _Held | None, n_tokens: int) -> Any:
        """A new cache holding the first n_tokens of `held`'s (which stays as it is)."""
        from transformers import DynamicCache

        if held is None:
            return DynamicCache(config=self.checkpoint.config)
        data = [(layer.keys[..., :n_tokens, :], layer.values[..., :n_tokens, :]) for layer in held.cache.layers]
        return DynamicCache(data, config=self.checkpoint.config)

    def _forward(self, rows: list[_Row]) -> tuple[list[Any], list[list[float]]]:
        """Append each row's tokens to its prefix in one batched pass: the rows' new caches and readouts."""
        from transformers import DynamicCache

        torch, device = self._torch, self.checkpoint.device
        past, new = max(r.start for r in rows), max(len(r.tokens) for r in rows)
        ids = torch.zeros((len(rows), new), dtype=torch.long, device=device)
        mask = torch.zeros((len(rows), past + new), dtype=torch.long, device=device)
        positions = torch.zeros((len(rows), new), dtype=torch.long, device=device)
        for i, r in enumerate(rows):
            ids[i, : len(r.tokens)] = torch.tensor(r.tokens, dtype=torch.long)
            mask[i, past - r.start : past + len(r.tokens)] = 1  # the prefix left-padded, the new tokens right-padded
            positions[i] = torch.arange(r.start, r.start + new)
        cache = DynamicCache(config=self.checkpoint.config)
        if past:
            cache = DynamicCache(self._batched_past(rows, past), config=self.checkpoint.config)
        padded = any(r.start < past or len(r.tokens) < new for r in rows)
        out = self.checkpoint.backbone(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=positions,
            use_cache=True,
            **{self._cache_kwarg: cache},
        )
        rows_at = [i for i, r in enumerate(rows) for _ in r.read_at]
        cols_at = [p for r in rows for p in r.read_at]
        flat = self.checkpoint.readout(out.last_hidden_state[rows_at, cols_at]) if rows_at else []
        scores, k = [], 0
        for r in rows:
            scores.append(flat[k : k + len(r.read_at)])
            k += len(r.read_at)
        caches = [
            DynamicCache(
                [
                    (
                        torch.cat(
                            [
                                layer.keys[i : i + 1, :, past - r.start : past],
                                layer.keys[i : i + 1, :, past : past + len(r.tokens)],
                            ],
                            dim=2,
                        ),
                        torch.cat(
                            [
                                layer.values[i : i + 1, :, past - r.start : past],
                                layer.values[i : i + 1, :, past : past + len(r.tokens)],
                            ],
                            dim=2,
                        ),
                    )
                    for layer in cache.layers
                ],
                config=self.checkpoint.config,
            )
            for i, r in enumerate(rows)
        ]
        return caches, scores

    def _batched_past(self, rows: list[_Row], past: int) -> list[tuple[Any, Any]]:
        """Per layer, the rows' held prefixes left-padded with zeros to `past` tokens."""
        torch = self._torch
        layers = []
        template = next(r.base for r in rows if r.base is not None).cache.layers
        for li, layer in enumerate(template):
            shape = (len(rows), layer.keys.shape[1], past, layer.keys.shape[3])
            keys = torch.zeros(shape, dtype=layer.keys.dtype, device=layer.keys.device)
            values = torch.zeros(shape, dtype=layer.values.dtype, device=layer.values.device)
            for i, r in enumerate(rows):
                if r.base is not None and r.start:
                    src = r.base.cache.layers[li]
                    keys[i, :, past - r.start :] = src.keys[0, :, : r.start]
                    values[i, :, past - r.start :] = src.values[0, :, : r.start]
            layers.append((keys, values))
        return layers
