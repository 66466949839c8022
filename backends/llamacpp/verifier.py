"""The Verifier protocol on llama.cpp with per-path KV reuse: a token-probability PRM in turn style (judge,
rlhflow), or a trained value head on the generator's own prompt (head).

KV layout of a held path: the head (system turn and the question), then one segment per step; `ends[0]` is where
the head ends and `ends[k]` where step k's segment ends. A request whose `prefix_key` names a held path forks that
sequence, cuts it back to the shared steps (free with a unified cache) and evaluates only the new segments. A
request for a path's first step names the request's root as `prefix_key`: the head is evaluated once and shared by
every path of that question. Held paths are dropped least-recently-used first when memory runs short; a request
whose prefix was dropped is rebuilt from scratch (counted in `stats.rebuilt_tokens`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgereason.backends.context_roles import ContextKVMemory, DecodeItem
from edgereason.backends.llamacpp.generator_scoring import GeneratorScoring
from edgereason.backends.llamacpp.layer_capture import LayerCapture
from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS, KVContext
from edgereason.backends.prm_format import PRMFormat, prompt_for
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.heads.value_head import ValueHead, head_features
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats


@dataclass
class _Held:
    seq: int
    ends: list[int]  # KV length after the head (index 0) and after each step's segment
    scores: list[Any]  # one per step: a score, or a head's features for `features`


def _capture_for(model: LlamaModel, head: ValueHead) -> LayerCapture:
    """The capture of the head's layers; ConfigError where the model has no such layers or width."""
    try:
        if head.layer_width != model.n_embd:
            raise ValueError(f"rows of {head.layer_width} values, not {model.n_embd}")
        return LayerCapture(model.n_embd, model.n_layer, head.layers)
    except ValueError as e:
        raise ConfigError(
            f"the value head reads layers {list(head.layers)} of width {head.layer_width}, which "
            f"{model.path.name} ({model.n_layer} layers of {model.n_embd}) does not have ({e}): "
            "corrupt head file; train it again with edgereason train-prm"
        ) from None


class LlamaVerifier(GeneratorScoring, ContextKVMemory):
    def __init__(
        self,
        model: LlamaModel,
        fmt: PRMFormat,
        kv_tokens: int,
        n_threads: int | None = None,
        n_seq_max: int = SEQ_SLOTS,
        flash_attn: bool = True,
        head: ValueHead | None = None,
        generator_ctx: KVContext | None = None,
        capture: LayerCapture | None = None,
    ) -> None:
        """generator_ctx: the generator's context on these same weights. A value head reads the generator's own
        prompt, so the generator's KV already holds what a step's score needs: a request naming a resident
        generator sequence is scored there, one row a step, instead of a prefill of the step here. Only where the
        generator's rows come back whole (host sampling): a row cut to its top k on the device lacks the logits
        the head reads. capture: hidden states of middle layers for `features` (training a head that reads them);
        a head that reads layers makes its own."""
        self.model = model
        self.fmt = fmt
        self.name = f"{model.path.stem}:{fmt.name}"
        scorer = head if fmt.name == "head" else None
        if scorer is not None:
            scorer.check_backbone(model.path, model.n_vocab)
            if scorer.layers:
                capture = _capture_for(model, scorer)
        self.ctx = KVContext(
            model, n_ctx=kv_tokens, n_seq_max=n_seq_max, n_threads=n_threads, flash_attn=flash_attn, capture=capture
        )
        if scorer is not None and scorer.adapter:
            self.ctx.apply_lora(model.lora(scorer.adapter.path))
        # the generator's context captures no layers and runs no adapter: such a head scores here
        use_gen = (
            fmt.name == "head"
            and generator_ctx is not None
            and generator_ctx.model is model
            and not (scorer is not None and (scorer.layers or scorer.adapter))
        )
        self._gen = generator_ctx if use_gen and generator_ctx.top_k is None else None
        self.prompt = prompt_for(fmt, lambda msgs: model.apply_chat_template(msgs, add_assistant=True))
        self._read: Callable[[np.ndarray], float] | None = None  # None: features only (training)
        if scorer is not None and scorer.layers:
            self._read = lambda logits: scorer.score(logits, capture.current())
        elif scorer is not None:
            self._read = scorer.score
        elif fmt.name != "head":
            good = model.tokenize(fmt.good, add_bos=False, special=False)[0]
            bad = model.tokenize(fmt.bad, add_bos=False, special=False)[0]
            # softmax over the two tokens
            self._read = lambda logits: 1.0 / (1.0 + float(np.exp(logits[bad] - logits[good])))
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._in_generator: set[str] = set()  # paths scored in the generator: nothing of theirs is held here
        self.stats = VerifierStats()

    def check_integrity(self) -> None:
        self.ctx.check_integrity()
        assert len({h.seq for h in self._held.values()}) == len(self._held) == self.ctx.live_seqs
        for h in self._held.values():
            assert self.ctx.seq_len(h.seq) == h.ends[-1] and len(h.ends) == len(h.scores) + 1

    def release(self, key_prefix: str) -> None:
        for key in [k for k in self._held if k.startswith(key_prefix)]:
            self.ctx.free(self._held.pop(key).seq)
        self._in_generator -= {k for k in self._in_generator if k.startswith(key_prefix)}

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

    @property
    def reads_generator(self) -> bool:
        return self._gen is not None

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Requests whose path the generator holds are read there; the rest in one call here when the KV share
        allows, else in halves until each part fits (one path must fit)."""
        if self._read is None:
            raise ConfigError(
                "--prm-format head needs a trained value head: pass --prm-head FILE "
                "(make one with edgereason train-prm)"
            )
        results: list[ScoreResult | None] = [None] * len(requests)
        there = [i for i, r in enumerate(requests) if self._resident(r)]
        scored = set(self._score_in_generator(requests, there, results)) if there else set()
        here = [i for i in range(len(requests)) if i not in scored]
        if here:
            for i, res in zip(here, self._in_parts([requests[i] for i in here], self._read)):
                results[i] = res
        return results  # type: ignore[return-value]

    def features(self, requests: Sequence[ScoreRequest], tokens: np.ndarray) -> list[np.ndarray]:
        """The logits of `tokens` at each requested step's last token, [len(need), len(tokens)] per request: what
        a value head reads (its training features). Needs the head format, so the prompt is the head's. With a
        layer capture each row goes on with the captured layers' hidden states at that token, flattened:
        [len(need), len(tokens) + len(capture.layers) * n_embd]."""
        if self.fmt.name != "head":
            raise ConfigError("value-head features need the head PRM format")
        capture = self.ctx.capture

        def read(row: np.ndarray) -> np.ndarray:
            return head_features(row, tokens, capture.current() if capture else None)

        return [np.stack(r.scores) for r in self._in_parts(requests, read)]

    def _in_parts(self, requests: Sequence[ScoreRequest], read: Callable[[np.ndarray], Any]) -> list[ScoreResult]:
        try:
            return self._score(requests, read)
        except OutOfMemoryError:
            if len(requests) < 2:
                raise
            half = len(requests) // 2
            return self._in_parts(requests[:half], read) + self._in_parts(requests[half:], read)

    def _heads(self, requests: Sequence[ScoreRequest]) -> int:
        """Evaluate the shared head of every question whose first steps are scored now; returns its tokens."""
        new = {
            r.prefix_key: r.question
            for r in requests
            if r.prefix_key and r.prefix_steps == 0 and r.prefix_key not in self._held
        }
        if not new:
            return 0
        heads = {key: self._tokens(self.prompt.head(q), first=True) for key, q in new.items()}
        total = sum(len(t) for t in heads.values())
        self._make_room(total, len(heads), {r.prefix_key for r in requests if r.prefix_key})
        items = []
        for key, toks in heads.items():
            seq = self.ctx.new_seq()
            self._held[key] = _Held(seq, [len(toks)], [])
            items.append(DecodeItem(seq, toks, []))
        self.ctx.decode(items, lambda *_: None)
        return total

    def _score(self, requests: Sequence[ScoreRequest], read: Callable[[np.ndarray], Any]) -> list[ScoreResult]:
        t0 = time.perf_counter()
        new_tokens = self._heads(requests)
        plans = []  # (base held or None, steps shared with it, head tokens or [], step segments)
        for req in requests:
            held = self._held.get(req.prefix_key) if req.prefix_key else None
            shared = min(req.prefix_steps, len(held.ends) - 1) if held else 0
            head = [] if held else self._tokens(self.prompt.head(req.question), first=True)
            segs = [self._tokens(t, first=False) for t in self.prompt.segments(req.steps, shared)]
            plans.append((held, shared, head, segs))
            if held is None and req.prefix_key and req.prefix_key not in self._in_generator:
                self.stats.rebuilt_tokens += len(head) + sum(len(t) for t in segs)
        step_tokens = sum(len(h) + sum(len(t) for t in segs) for _, _, h, segs in plans)
        self._make_room(step_tokens, len(plans), {r.prefix_key for r in requests if r.prefix_key})

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
            state = _Held(seq, ends + [start + o + 1 for o, _ in outputs], scores + [0.0] * len(segs))
            states.append(state)
            if flat:
                items.append(DecodeItem(seq, flat, outputs))

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

    def _count_call(self, tokens: int, t0: float) -> None:
        """One forward pass of `tokens` (in this context or the generator's), begun at perf_counter() t0."""
        self.stats.calls += 1
        self.stats.tokens += tokens
        self.stats.seconds += time.perf_counter() - t0
        self.stats.per_call_tokens.append(tokens)

    def close(self) -> None:
        self.ctx.close()
