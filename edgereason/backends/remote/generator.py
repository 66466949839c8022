"""The Generator protocol over an OpenAI-compatible server: the engine keeps driving token by token,
and this adapter answers its draws from whole steps the server generated.

The seam: the engine asks a sequence for `k` draws from its next-token distribution. A sequence with
no plan for its position sends ONE request for the rest of the step (`/v1/completions`, prompt = the
path so far as token ids, `stop` at the step delimiter, `n = k`, `seed` = the engine's seed for that
draw) and keeps the k completions as *plans*: token lists that continue the context they were asked
for. Later draws read the plans' next tokens without any HTTP, so a step costs one round trip, not
one per token.

Rules that keep the samples independent and the search replayable:
- A plan is read forward only: each of its positions is drawn once (`cursor`), by the sequence that
  draws it.
- A sequence draws from a plan only if the plan continues exactly its tokens (same context, same
  tokens so far).
- Plans are shared along forks (a family): the children and deduplicated twins of a node read the
  completions their parent's draw fetched. A plan drawn once (k = 1) stays with its sequence; others
  stay free for the sequences that the engine forks from the draw.
- Every draw is a function of the context and the engine's seed, as long as the server honours
  `seed` (llama.cpp's server and vLLM do) and answers `n` (a server that ignores it, as
  llama-cpp-python's does, gets one request per missing completion, seeded `mix_seed(seed, j)`).

Each sequence remembers the server that answered its last request (`home`, inherited by its forks),
where its prefix is cached, and its next request asks to go there (pool.py's routing rule).

The server holds the KV: this side holds no cells (`kv_used_tokens` 0); `kv_capacity_tokens` is the
longest sequence the server is asked to hold (its context)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import llama_cpp.llama_cpp as L

from edgereason.backends.llama_vocab import LlamaVocab
from edgereason.backends.remote.answers import Choice
from edgereason.backends.remote.errors import RemoteError
from edgereason.backends.remote.pool import ServerPool
from edgereason.config import STEP_END, SamplingParams, mix_seed
from edgereason.protocols import BatchEntry, SeqId

STEP_STOP = STEP_END.decode()
SEED_MASK = 0x7FFFFFFF  # servers take a signed 32-bit seed


@dataclass(eq=False)
class _Plan:
    base: list[int]  # the context the completion continues
    tokens: list[int]  # the completion (EOS last when the server stopped at the end of text)
    cursor: int = 0  # positions below it have been drawn
    owner: SeqId | None = None


@dataclass(eq=False)
class _Seq:
    tokens: list[int]
    family: list[_Plan] = field(default_factory=list)  # shared with every fork
    # the server that answered this sequence's (or its parent's) last request
    home: int | None = None


class RemoteGenerator:
    def __init__(
        self, client: ServerPool, vocab: LlamaVocab, context_tokens: int, step_tokens: int = 512
    ) -> None:
        """client: the servers. vocab: the served model's tokenizer and chat template (a GGUF read
        vocab-only). context_tokens: the servers' context per sequence. step_tokens: max_tokens of
        one request (a longer step takes several)."""
        self.client = client
        self.vocab = vocab
        self.name = f"{vocab.path.stem}@{','.join(client.roots)}"
        self.eos_ids = vocab.eog_ids
        eos = L.llama_vocab_eos(vocab.vocab)
        self._eos = eos if eos in self.eos_ids else min(self.eos_ids)
        self._capacity = min(context_tokens, vocab.n_ctx_train)
        self.step_tokens = step_tokens
        self._seqs: dict[SeqId, _Seq] = {}
        self._next_id = 0
        # does the server answer n > 1 with n choices? learnt once
        self._n_honoured: bool | None = None
        self.planned_draws = 0  # draws answered from a fetched completion, without a round trip

    # -- text --
    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self.vocab.tokenize(text, add_bos=self.vocab.add_bos, special=special)

    def token_piece(self, token: int) -> bytes:
        return self.vocab.token_piece(token)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.vocab.apply_chat_template(messages, add_assistant=True)

    # -- sequences: token lists; the server caches shared prefixes itself --
    def new_seq(self) -> SeqId:
        return self._add(_Seq([]))

    def fork(self, parent: SeqId) -> SeqId:
        p = self._seqs[parent]
        return self._add(_Seq(list(p.tokens), p.family, p.home))

    def _add(self, seq: _Seq) -> SeqId:
        sid, self._next_id = self._next_id, self._next_id + 1
        self._seqs[sid] = seq
        return sid

    def free(self, seq: SeqId) -> None:
        s = self._seqs.pop(seq)
        for plan in s.family:
            if plan.owner == seq:
                plan.owner = None

    def truncate(self, seq: SeqId, n_tokens: int) -> None:
        del self._seqs[seq].tokens[n_tokens:]

    def seq_len(self, seq: SeqId) -> int:
        return len(self._seqs[seq].tokens)

    def live_seqs(self) -> int:
        return len(self._seqs)

    def requests_per_server(self) -> dict[str, int]:
        return self.client.requests_per_server()

    def check_integrity(self) -> None:
        """A plan is drawn only by a live sequence, and never past its end."""
        for sid, seq in self._seqs.items():
            for plan in seq.family:
                assert plan.owner is None or plan.owner in self._seqs, (
                    f"a plan of {sid} is owned by a freed sequence"
                )
                assert 0 <= plan.cursor <= len(plan.tokens), (
                    f"a plan of {sid} was drawn past its end"
                )

    def free_seq_slots(self) -> int:
        return 1 << 20

    @property
    def kv_capacity_tokens(self) -> int:
        return self._capacity

    @property
    def kv_used_tokens(self) -> int:
        return 0

    @property
    def max_batch_tokens(self) -> int:
        return self._capacity

    @property
    def context_length(self) -> int:
        return self.vocab.n_ctx_train

    # -- draws --
    def step(
        self,
        batch: Sequence[BatchEntry],
        samples: Sequence[int],
        sampling: SamplingParams | Sequence[SamplingParams],
    ) -> list[list[int]]:
        """Feed every entry, then draw: from plans where they continue the sequence, the rest from
        one round of concurrent requests."""
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        for e in batch:
            self._seqs[e.seq].tokens.extend(e.tokens)
        out: list[list[int]] = [[] for _ in batch]
        missing: list[tuple[int, int]] = []  # (entry index, completions to fetch)
        for i, (e, k) in enumerate(zip(batch, samples)):
            if k > 0:
                out[i] = self._draw_planned(e.seq, k)
                self.planned_draws += len(out[i])
                if len(out[i]) < k:
                    missing.append((i, k - len(out[i])))
        if missing:
            fetched = self._fetch([(batch[i].seq, n, params[i]) for i, n in missing])
            for (i, _), plans in zip(missing, fetched):
                seq = self._seqs[batch[i].seq]
                for plan in plans:
                    plan.cursor, plan.owner = 1, batch[i].seq if samples[i] == 1 else None
                    seq.family.append(plan)
                    out[i].append(plan.tokens[0])
        return out

    def _draw_planned(self, sid: SeqId, k: int) -> list[int]:
        """Up to k next tokens from plans that continue this sequence: its own first, then free
        ones."""
        seq = self._seqs[sid]
        seq.family[:] = [p for p in seq.family if p.cursor < len(p.tokens)]  # read to the end: gone
        mine = [p for p in seq.family if p.owner == sid]
        free = [p for p in seq.family if p.owner is None]
        drawn: list[int] = []
        for plan in mine + free:
            if len(drawn) == k:
                break
            pos = _continues(plan, seq.tokens)
            if pos is not None and pos >= plan.cursor:
                drawn.append(plan.tokens[pos])
                plan.cursor, plan.owner = pos + 1, sid if k == 1 else None
        for plan in mine:  # a sequence keeps a plan only while it follows it
            if plan.owner == sid and plan.cursor != len(seq.tokens) - len(plan.base) + 1:
                plan.owner = None
        return drawn

    def _fetch(self, wants: list[tuple[SeqId, int, SamplingParams]]) -> list[list[_Plan]]:
        """One round of requests: `n` completions of each sequence's step, all in flight
        together."""
        bodies: list[dict[str, Any]] = []
        owners: list[int] = []  # which want each body serves
        for w, (sid, n, sp) in enumerate(wants):
            body = self._step_body(sid, sp)
            if n > 1 and self._n_honoured is False:  # one request per draw, seeded apart
                for j in range(n):
                    bodies.append({**body, "n": 1, "seed": _reseed(sp, j).seed & SEED_MASK})
                    owners.append(w)
            else:
                bodies.append({**body, "n": n, "seed": sp.seed & SEED_MASK})
                owners.append(w)
        plans: list[list[_Plan]] = [[] for _ in wants]
        seqs = [self._seqs[sid] for sid, _, _ in wants]
        for w, (answer, server) in zip(
            owners, self.client.send(bodies, [seqs[w].home for w in owners])
        ):
            seqs[w].home = server
            plans[w] += [_Plan(list(seqs[w].tokens), self._tokens_of(c)) for c in answer.choices]
        short = [w for w, (_, n, _) in enumerate(wants) if len(plans[w]) < n]
        # it answers one choice whatever n is: top up, then one per draw
        if short and self._n_honoured is None:
            self._n_honoured = False
            extra = [(w, j) for w in short for j in range(len(plans[w]), wants[w][1])]
            top = self._fetch([(wants[w][0], 1, _reseed(wants[w][2], j)) for w, j in extra])
            for (w, _), got in zip(extra, top):
                plans[w] += got
        elif self._n_honoured is None and any(n > 1 for _, n, _ in wants):
            self._n_honoured = True
        if fewer := [w for w, (_, n, _) in enumerate(wants) if len(plans[w]) < n]:
            root = self.client.roots[seqs[fewer[0]].home or 0]
            raise RemoteError(f"the server at {root} answered fewer completions than asked")
        return [plans[w][:n] for w, (_, n, _) in enumerate(wants)]

    def _step_body(self, sid: SeqId, sp: SamplingParams) -> dict[str, Any]:
        """The request body (no `n` or `seed` yet) for the rest of this sequence's step: kept apart
        so `_fetch` only decides how many requests to send and reads what they answer."""
        context = self._seqs[sid].tokens
        room = self._capacity - len(context) - 1
        # the engine ends a path before this; reaching it is a bug, not a user error
        if room < 1:
            raise RemoteError(
                f"a path of {len(context)} tokens has no room left in the server's context "
                f"({self._capacity})"
            )
        # token ids: a server parses "<|im_end|>" in text as the control token, in a problem or
        # a step too
        return {
            "prompt": list(context),
            "max_tokens": min(self.step_tokens, room),
            "stop": [STEP_STOP],
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "cache_prompt": True,
        }  # llama.cpp's server: keep the prefix's KV (others ignore it)

    def _tokens_of(self, choice: Choice) -> list[int]:
        """A completion as tokens. The server cut it at the step delimiter (and left the delimiter
        out) or at the end of text, and OpenAI's `finish_reason` is "stop" for both: vLLM and SGLang
        say which (`stop_reason` / `matched_stop`); otherwise non-empty text is taken as a step (a
        path that really ended gets an empty next step, which the next request shows as an immediate
        end of text)."""
        text = choice.text
        if choice.finish_reason != "stop":  # "length": the step goes on in the next request
            tokens = self.vocab.tokenize(text, add_bos=False, special=False)
            # nothing decodable came back: end the path rather than loop
            return tokens or [self._eos]
        # it says it stopped at the end of text
        if not text or (choice.said_stop and choice.stop is None):
            return self.vocab.tokenize(text, add_bos=False, special=False) + [self._eos]
        return self.vocab.tokenize(text + STEP_STOP, add_bos=False, special=False)

    def close(self) -> None:
        self.client.close()


def _continues(plan: _Plan, context: list[int]) -> int | None:
    """The position in `plan` this context has reached, if the plan continues it and has a token
    there."""
    b = len(plan.base)
    pos = len(context) - b
    if pos < 0 or pos >= len(plan.tokens):
        return None
    if context[:b] != plan.base or context[b:] != plan.tokens[:pos]:
        return None
    return pos


def _reseed(sp: SamplingParams, j: int) -> SamplingParams:
    return SamplingParams(sp.temperature, sp.top_p, mix_seed(sp.seed, j) if j else sp.seed)
