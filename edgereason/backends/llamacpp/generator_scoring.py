"""Scoring a value head's steps in the generator's own context (LlamaVerifier's part for a head that
reads the generator's prompt): the generator's KV already holds what a step's score needs, so a
resident path's step is one row read there, not a prefill in the PRM's context."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.runtime import KVContext
from edgereason.backends.prm_format import SolvePrompt, TagPrompt, TurnPrompt
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats


class GeneratorScoring:
    """Reads requested steps in `_gen`, the generator's context; the verifier supplies the state
    below."""

    _gen: KVContext | None
    _read: Callable[[np.ndarray], float] | None
    _elsewhere: set[str]  # the paths scored in the generator
    prompt: TurnPrompt | SolvePrompt | TagPrompt
    stats: VerifierStats

    if TYPE_CHECKING:

        def _tokens(self, text: str, first: bool) -> list[int]: ...

        def _count_call(self, tokens: int, t0: float) -> None: ...

    @property
    def reads_generator(self) -> bool:
        return self._gen is not None

    def _score_elsewhere(
        self,
        requests: Sequence[ScoreRequest],
        results: list[ScoreResult | None],
    ) -> set[int]:
        """PathVerifier's hook: the requests whose path the generator holds, read there."""
        there = [i for i, r in enumerate(requests) if self._resident(r)]
        return set(self._score_in_generator(requests, there, results)) if there else set()

    def _resident(self, req: ScoreRequest) -> bool:
        """The generator holds the path, tokenized as its text would be here. A head learned steps
        tokenized from their text; a step sampled otherwise (two "\n" where the text gives one
        "\n\n") is scored here, as it was trained."""
        path = req.generator_path
        if self._gen is None or path is None or path.seq is None:
            return False
        starts = [path.prompt_len, *path.ends[:-1]]
        last = max(req.need) + 1
        return all(
            list(path.tokens[a:b]) == self._tokens(segment, first=False)
            for a, b, segment in zip(starts, path.ends, self.prompt.segments(req.steps[:last], 0))
        )

    def _score_in_generator(
        self,
        requests: Sequence[ScoreRequest],
        slots: Sequence[int],
        results: list[ScoreResult | None],
    ) -> list[int]:
        """Each requested step's row, read in the generator's context: a fork of the path's
        sequence, cut back to just before the step's last token, is fed that token (one cell, freed
        at once; fork and cut touch no data in a unified cache). Requests are taken in order while
        the generator's KV has room for their rows; returns the slots scored (the rest go to the PRM
        context)."""
        assert self._gen is not None and self._read is not None
        ctx, t0 = self._gen, time.perf_counter()
        plans, fed, taken = _plan_rows(ctx, requests, slots)
        if not plans:
            return []
        scores = {slot: [0.0] * len(requests[slot].need) for slot in taken}
        forks, items = [], []
        try:
            for slot, j, seq, start, toks in plans:
                fork = ctx.fork(seq)
                forks.append(fork)
                ctx.truncate(fork, start)
                items.append(DecodeItem(fork, toks, [(len(toks) - 1, (slot, j))]))

            def on_row(tag: object, row: np.ndarray) -> None:
                slot, j = tag  # type: ignore[misc]
                scores[slot][j] = self._read(row)  # type: ignore[misc]

            ctx.decode(items, on_row)
        finally:
            for fork in forks:
                ctx.free(fork)
        for slot in taken:
            results[slot] = ScoreResult(scores[slot], sum(len(p[4]) for p in plans if p[0] == slot))
            self._elsewhere.add(requests[slot].key)
        self.stats.generator_rows += len(plans)
        self._count_call(fed, t0)
        return taken


def _plan_rows(
    ctx: KVContext, requests: Sequence[ScoreRequest], slots: Sequence[int]
) -> tuple[list[tuple[int, int, int, int, Sequence[int]]], int, list[int]]:
    """_score_in_generator's plan, apart to keep it short: the rows of the slots taken in order
    while the generator's KV has room; returns (plans, tokens fed, slots taken)."""
    # (slot, index into its need, the path's sequence, where the fork is cut, tokens fed)
    plans: list[tuple[int, int, int, int, Sequence[int]]] = []
    fed, taken = 0, []
    for slot in slots:
        req, path = requests[slot], requests[slot].generator_path
        assert path is not None and path.seq is not None
        held = ctx.seq_len(path.seq)
        rows = []
        for j, k in enumerate(req.need):
            start = min(held, path.ends[k] - 1)
            rows.append((slot, j, path.seq, start, path.tokens[start : path.ends[k]]))
        more = sum(len(r[4]) for r in rows)
        if not (ctx.can_append(fed + more) and ctx.can_alloc(len(plans) + len(rows))):
            break
        plans += rows
        fed += more
        taken.append(slot)
    return plans, fed, taken
