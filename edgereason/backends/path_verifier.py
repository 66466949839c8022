"""A Verifier's path bookkeeping over a context, shared by the llama.cpp and torch verifiers:
per-path KV reuse through fork and truncate, shared question heads, least-recently-used eviction,
halving on a full cache. The context is either backend's (context_roles.Context); a subclass
supplies it and the row reader.

KV layout of a held path: the head (system turn and the question), then one segment per step;
`ends[0]` is where the head ends and `ends[k]` where step k's segment ends. A request whose
`prefix_key` names a held path forks that sequence, cuts it back to the shared steps (free with a
unified cache) and evaluates only the new segments. A request for a path's first step names the
request's root as `prefix_key`: the head is evaluated once and shared by every path of that
question. Held paths are dropped least-recently-used first when memory runs short; a request whose
prefix was dropped is rebuilt from scratch (counted in `stats.rebuilt_tokens`)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgereason.backends.context_roles import Context, ContextKVMemory, ContextModel, DecodeItem
from edgereason.backends.prm_format import PRMFormat, prompt_for
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats

# what a step's row is read into: its score, or a head's features (`features`)
StepValue = float | np.ndarray
# a requested row (its logits, or the columns read) -> its step's value
RowReader = Callable[[np.ndarray], StepValue]


@dataclass
class Held:
    seq: int
    ends: list[int]  # KV length after the head (index 0) and after each step's segment
    scores: list[StepValue]  # one per step


# one request's plan: (base held or None, steps shared with it, head tokens or [], step segments)
_Plan = tuple[Held | None, int, list[int], list[list[int]]]


class PathVerifier(ContextKVMemory):
    def __init__(
        self,
        name: str,
        model: ContextModel,
        fmt: PRMFormat,
        ctx: Context,
        read: RowReader | None,
    ) -> None:
        """ctx: the context over `model`; read: how a row becomes a score (None: the head format
        without a head, which scores nothing)."""
        self.name = name
        self.model = model
        self.fmt = fmt
        self.ctx = ctx
        self.prompt = prompt_for(fmt, lambda m: model.apply_chat_template(m, add_assistant=True))
        self._read = read
        self._held: OrderedDict[str, Held] = OrderedDict()
        # paths scored elsewhere (the generator's context): none of theirs is held here
        self._elsewhere: set[str] = set()
        self.stats = VerifierStats()
        # question -> its head's tokens: every path of a question rebuilt from scratch (best-of-N
        # scores whole paths) tokenizes the same head
        self._heads_seen: dict[str, list[int]] = {}

    def check_integrity(self) -> None:
        self.ctx.check_integrity()
        assert len({h.seq for h in self._held.values()}) == len(self._held) == self.ctx.live_seqs
        for h in self._held.values():
            assert self.ctx.seq_len(h.seq) == h.ends[-1] and len(h.ends) == len(h.scores) + 1

    def release(self, key_prefix: str) -> None:
        for key in [k for k in self._held if k.startswith(key_prefix)]:
            self.ctx.free(self._held.pop(key).seq)
        self._elsewhere -= {k for k in self._elsewhere if k.startswith(key_prefix)}

    def _make_room(self, n_tokens: int, n_seqs: int, protect: set[str]) -> None:
        """Drop least-recently-used held paths until n_tokens new cells and n_seqs ids fit."""
        for key in list(self._held):
            if self.ctx.can_append(n_tokens) and self.ctx.can_alloc(n_seqs):
                return
            if key not in protect:
                self.ctx.free(self._held.pop(key).seq)
        if not (self.ctx.can_append(n_tokens) and self.ctx.can_alloc(n_seqs)):
            raise OutOfMemoryError(
                f"the PRM needs {n_tokens} KV tokens for one call but has "
                f"{self.ctx.capacity - self.ctx.used_tokens} free of {self.ctx.capacity}; "
                "give the verifier a larger KV share"
            )

    def _tokens(self, text: str, first: bool) -> list[int]:
        return self.model.tokenize(text, add_bos=first and self.model.add_bos, special=True)

    def _head_tokens(self, question: str) -> list[int]:
        """The head's tokens (system turn and question), tokenized once a question; the last 64
        questions are kept."""
        tokens = self._heads_seen.get(question)
        if tokens is None:
            if len(self._heads_seen) >= 64:
                del self._heads_seen[next(iter(self._heads_seen))]
            tokens = self._heads_seen[question] = self._tokens(self.prompt.head(question), True)
        return list(tokens)  # the caller's to keep: the cached list never changes

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Requests scored elsewhere first (`_score_elsewhere`), the rest in one call here when the
        KV share allows, else in halves until each part fits (one path must fit)."""
        if self._read is None:
            raise ConfigError(
                "--prm-format head needs a trained value head: pass --prm-head FILE "
                "(make one with edgereason train-prm)"
            )
        results: list[ScoreResult | None] = [None] * len(requests)
        scored = self._score_elsewhere(requests, results)
        here = [i for i in range(len(requests)) if i not in scored]
        if here:
            for i, res in zip(here, self._in_parts([requests[i] for i in here], self._read)):
                results[i] = res
        return results  # type: ignore[return-value]

    def _score_elsewhere(
        self,
        requests: Sequence[ScoreRequest],
        results: list[ScoreResult | None],
    ) -> set[int]:
        """Fill in the requests another context scores; returns their indices (none here)."""
        return set()

    def _in_parts(self, requests: Sequence[ScoreRequest], read: RowReader) -> list[ScoreResult]:
        try:
            return self._score(requests, read)
        except OutOfMemoryError:
            if len(requests) < 2:
                raise
            half = len(requests) // 2
            return self._in_parts(requests[:half], read) + self._in_parts(requests[half:], read)

    def _heads(self, requests: Sequence[ScoreRequest]) -> int:
        """Evaluate the shared head of every question whose first steps are scored now; returns its
        tokens."""
        new = {
            r.prefix_key: r.question
            for r in requests
            if r.prefix_key and r.prefix_steps == 0 and r.prefix_key not in self._held
        }
        if not new:
            return 0
        heads = {key: self._head_tokens(q) for key, q in new.items()}
        total = sum(len(t) for t in heads.values())
        self._make_room(total, len(heads), {r.prefix_key for r in requests if r.prefix_key})
        items = []
        for key, toks in heads.items():
            seq = self.ctx.new_seq()
            self._held[key] = Held(seq, [len(toks)], [])
            items.append(DecodeItem(seq, toks, []))
        self.ctx.decode(items, lambda *_: None)
        return total

    def _score(self, requests: Sequence[ScoreRequest], read: RowReader) -> list[ScoreResult]:
        t0 = time.perf_counter()
        new_tokens = self._heads(requests)
        plans = self._plan(requests)
        step_tokens = sum(len(h) + sum(len(t) for t in segs) for _, _, h, segs in plans)
        self._make_room(step_tokens, len(plans), {r.prefix_key for r in requests if r.prefix_key})

        items, states = self._sequences(plans)

        def on_row(tag: object, row: np.ndarray) -> None:
            ri, step = tag  # type: ignore[misc]
            states[ri].scores[step] = read(row)

        self.ctx.decode(items, on_row)
        self.stats.peak_tokens = max(self.stats.peak_tokens, self.ctx.used_tokens)
        for req, state in zip(requests, states):
            old = self._held.pop(req.key, None)
            if old is not None:
                self.ctx.free(old.seq)
            self._held[req.key] = state
        for req in requests:  # a used prefix is recent
            if req.prefix_key in self._held:
                self._held.move_to_end(req.prefix_key)
        self._count_call(new_tokens + step_tokens, t0)
        return [
            ScoreResult([state.scores[i] for i in req.need], len(head) + sum(len(t) for t in segs))
            for req, state, (_, _, head, segs) in zip(requests, states, plans)
        ]

    def _plan(self, requests: Sequence[ScoreRequest]) -> list[_Plan]:
        """_score's first part, apart to keep it short: each request's base, shared steps, head
        tokens and step segments; counts tokens rebuilt for a dropped prefix."""
        plans = []  # (base held or None, steps shared with it, head tokens or [], step segments)
        for req in requests:
            held = self._held.get(req.prefix_key) if req.prefix_key else None
            shared = min(req.prefix_steps, len(held.ends) - 1) if held else 0
            head = [] if held else self._head_tokens(req.question)
            segs = [self._tokens(t, first=False) for t in self.prompt.segments(req.steps, shared)]
            plans.append((held, shared, head, segs))
            if held is None and req.prefix_key and req.prefix_key not in self._elsewhere:
                self.stats.rebuilt_tokens += len(head) + sum(len(t) for t in segs)
        return plans

    def _sequences(self, plans: list[_Plan]) -> tuple[list[DecodeItem], list[Held]]:
        """A sequence per plan (a fork cut to the shared steps, or a new one), apart to keep _score
        short; returns the decode items and each request's new Held state (scores still 0)."""
        items, states = [], []
        for ri, (base, shared, head, segs) in enumerate(plans):
            if base is not None:
                seq = self.ctx.fork(base.seq)
                self.ctx.truncate(seq, base.ends[shared])
                ends, scores = base.ends[: shared + 1], base.scores[:shared]
            else:
                seq, ends, scores = self.ctx.new_seq(), [len(head)], []
            flat = list(head)
            outputs = []
            for si, toks in enumerate(segs):
                flat += toks
                outputs.append((len(flat) - 1, (ri, shared + si)))
            start = ends[-1] - len(head)
            ends += [start + o + 1 for o, _ in outputs]
            state = Held(seq, ends, scores + [0.0] * len(segs))
            states.append(state)
            if flat:
                items.append(DecodeItem(seq, flat, outputs))
        return items, states

    def _count_call(self, tokens: int, t0: float) -> None:
        """One forward pass of `tokens` (in this context or the generator's), begun at
        perf_counter() t0."""
        self.stats.calls += 1
        self.stats.tokens += tokens
        self.stats.seconds += time.perf_counter() - t0
        self.stats.per_call_tokens.append(tokens)

    def close(self) -> None:
        self.ctx.close()
