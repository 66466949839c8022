"""The Verifier protocol over an OpenAI-compatible server: a token-probability PRM (judge, rlhflow,
math-shepherd) read from the `logprobs` of the next token.

Each requested step is one completion request: the PRM prompt up to that step's read position
(backends/prm_format .py, the tokens the local verifier evaluates, sent as token ids), `max_tokens:
1`, `logprobs: 20`, temperature 0. Its score is P(good) / (P(good) + P(bad)), the tokens the local
verifier reads, from the top-20 answer. Every score of one `score()` call is in flight at once: the
engine's lazy verification, which batches PRM requests, becomes one round of concurrent HTTP
requests; the server's prefix cache plays the part of the local verifier's per-path KV.

Where good or bad is outside the top 20, one more round reads them with `logit_bias` (every
OpenAI-compatible server takes it) - three requests for that score, all in that round:
- both tokens raised by the same +100: a server whose logprobs are taken after the bias returns both
  at the top, and a shared shift leaves their ratio unchanged;
- each token raised alone: a server whose logprobs are the model's own, before the bias
  (llama-cpp-python's, llama.cpp's llama-server, vLLM by default), returns only the sampled token's,
  and the sampled token is then the raised one, so each request gives one of the two, unbiased. The
  first answer is used where it holds both tokens (both values come from one distribution, shifted
  alike), else the other two; never values of different requests mixed with a bias in between.

Several PRM servers: each score asks to go to the server that scored its path's parent (pool.py's
routing rule), whose prompt cache holds the parent's prompt; the logit_bias round goes where its
score's first request went.

The `head` format cannot be served: a value head reads thousands of logits per step, a server
returns 20."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from edgereason.backends.llama_vocab import LlamaVocab
from edgereason.backends.prm_format import PRMFormat, prompt_for
from edgereason.backends.remote.answers import Logprobs
from edgereason.backends.remote.errors import RemoteError
from edgereason.backends.remote.pool import Reply, ServerPool
from edgereason.errors import ConfigError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats

TOP_LOGPROBS = 20  # what OpenAI's API and vLLM (--max-logprobs) allow by default
# the largest logit_bias OpenAI's API and vLLM accept: puts a token first against any logit gap
BIAS = 100.0

Pair = tuple[float | None, float | None]  # (log P(good), log P(bad)); None: not in the answer


class RemoteVerifier:
    def __init__(
        self,
        client: ServerPool,
        vocab: LlamaVocab,
        fmt: PRMFormat,
        top_logprobs: int = TOP_LOGPROBS,
    ) -> None:
        """vocab: the served PRM's tokenizer and chat template (a GGUF read vocab-only); its token
        ids name the tokens to the server's `logit_bias`. top_logprobs: `logprobs` of the first
        request of a score (fewer make the logit_bias round more frequent, which tests use)."""
        if fmt.prompt == "solve":
            raise ConfigError(
                f"--prm-format {fmt.name} reads thousands of logits per step and a server returns "
                f"{TOP_LOGPROBS}: use judge, rlhflow or math-shepherd with a remote PRM"
            )
        if not 1 <= top_logprobs <= TOP_LOGPROBS:
            raise ConfigError(f"top_logprobs must be in 1..{TOP_LOGPROBS}, got {top_logprobs}")
        self.client = client
        self.vocab = vocab
        self.fmt = fmt
        self.top_logprobs = top_logprobs
        self.name = f"{vocab.path.stem}:{fmt.name}@{','.join(client.roots)}"
        self.prompt = prompt_for(
            fmt, lambda msgs: vocab.apply_chat_template(msgs, add_assistant=True)
        )
        # the answer tokens as the local verifier reads them: the first token of each word
        self._ids = [
            vocab.tokenize(w, add_bos=False, special=False)[0] for w in (fmt.good, fmt.bad)
        ]
        self._pieces = [vocab.token_piece(i).decode("utf-8", errors="replace") for i in self._ids]
        self.stats = VerifierStats()
        self.biased_scores = 0  # scores read in the logit_bias round
        self._homes: dict[str, int] = {}  # path key -> the server that scored it last

    kv_capacity_tokens = 1 << 30  # the server holds the KV
    kv_used_tokens = 0
    kv_bytes_per_token = 0

    def release(self, key_prefix: str) -> None:
        """No KV is held here (the server's cache evicts on its own); the paths' homes are
        forgotten."""
        for key in [k for k in self._homes if k.startswith(key_prefix)]:
            del self._homes[key]

    def requests_per_server(self) -> dict[str, int]:
        return self.client.requests_per_server()

    def check_integrity(self) -> None:
        """Every call is counted once."""
        assert len(self.stats.per_call_tokens) == self.stats.calls, (
            "PRM calls and their token counts disagree"
        )

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        t0 = time.perf_counter()
        prompts: list[list[int]] = []
        keys: list[str] = []  # the path each prompt scores
        new_tokens: list[int] = []
        for req in requests:
            head, segments = self._tokens(req)
            prompts += [head + [t for seg in segments[: i + 1] for t in seg] for i in req.need]
            keys += [req.key] * len(req.need)
            # what a prefix-caching server evaluates anew: the steps past the prefix it saw (the
            # local count)
            fresh = segments[req.prefix_steps :] if req.prefix_key else [head, *segments]
            new_tokens.append(sum(len(seg) for seg in fresh))
        replies = self.client.send(
            [self._body(p, self.top_logprobs) for p in prompts], self._route(requests)
        )
        self._homes.update((key, reply.server) for key, reply in zip(keys, replies))
        pairs = [self._pair(r) for r in replies]
        missing = [i for i, (good, bad) in enumerate(pairs) if good is None or bad is None]
        if missing:
            pairs = self._biased(prompts, missing, pairs, [replies[i].server for i in missing])
        scores = iter(_share(good, bad) for good, bad in pairs)  # type: ignore[arg-type]
        results = [
            ScoreResult([next(scores) for _ in req.need], n) for req, n in zip(requests, new_tokens)
        ]
        self.stats.calls += 1
        self.stats.tokens += sum(new_tokens)
        self.stats.per_call_tokens.append(sum(new_tokens))
        self.stats.seconds += time.perf_counter() - t0
        return results

    def _route(self, requests: Sequence[ScoreRequest]) -> list[int | None]:
        """Each prompt's home: where its path, else the path it extends, was scored last."""
        homes = []
        for req in requests:
            home = self._homes.get(req.key, self._homes.get(req.prefix_key or "", None))
            homes += [home] * len(req.need)
        return homes

    def _tokens(self, req: ScoreRequest) -> tuple[list[int], list[list[int]]]:
        """The head's and each step's tokens, as the local verifier evaluates them. Sent as token
        ids, not text: a server parses "<|im_end|>" in text as the control token, where a question's
        or a step's is text."""
        head = self.vocab.tokenize(self.prompt.head(req.question), add_bos=self.vocab.add_bos)
        return head, [self.vocab.tokenize(seg) for seg in self.prompt.segments(req.steps, 0)]

    def _body(self, prompt: list[int], top: int, bias: Sequence[int] = ()) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": 1,
            "logprobs": top,
            "temperature": 0.0,
            "cache_prompt": True,
        }
        if bias:
            # token ids, as OpenAI's API names them
            body["logit_bias"] = {str(i): BIAS for i in bias}
        return body

    def _biased(
        self, prompts: list[list[int]], missing: list[int], pairs: list[Pair], homes: list[int]
    ) -> list[Pair]:
        """The scores at `missing` read again with logit_bias, in one round (module docstring), each
        where its first request was answered."""
        good, bad = self._ids
        bodies = [
            self._body(prompts[i], max(2, self.top_logprobs), b)
            for i in missing
            for b in ((good, bad), (good,), (bad,))
        ]
        replies = self.client.send(bodies, [home for home in homes for _ in range(3)])
        pairs = list(pairs)
        for k, i in enumerate(missing):
            shared, alone_good, alone_bad = replies[3 * k : 3 * k + 3]
            pair = self._pair(shared)
            # logprobs from before the bias: one token per request
            if pair[0] is None or pair[1] is None:
                pair = (self._sampled(alone_good, 0), self._sampled(alone_bad, 1))
            pairs[i] = pair
        self.biased_scores += len(missing)
        return pairs

    def _pair(self, reply: Reply) -> Pair:
        """log P(good), log P(bad) from the first position's top logprobs and its sampled token."""
        top = self._top(reply)
        return tuple(top.get(piece, _alike(top, piece)) for piece in self._pieces)  # type: ignore[return-value]

    def _sampled(self, reply: Reply, which: int) -> float:
        """The logprob of the sampled token, which logit_bias made good (which=0) or bad (1)."""
        piece = self._pieces[which]
        logprobs = self._logprobs(reply)
        if not logprobs.tokens or not logprobs.token_logprobs:
            raise self._no_logprobs(reply.server)
        token, value = logprobs.tokens[0], logprobs.token_logprobs[0]
        if token.strip() != piece.strip() or value is None:
            raise RemoteError(
                f"the PRM server at {self.client.roots[reply.server]} ignored `logit_bias` (it "
                f"sampled {token!r}, not {piece!r}), which a score whose {piece!r} is outside the "
                f"top {self.top_logprobs} logprobs needs"
            )
        return value

    def _top(self, reply: Reply) -> dict[str, float]:
        """The first position's top logprobs, the sampled token's among them (some servers list it
        apart)."""
        logprobs = self._logprobs(reply)
        if not logprobs.top:
            raise self._no_logprobs(reply.server)
        top = dict(logprobs.top[0])
        if logprobs.tokens and logprobs.token_logprobs and logprobs.token_logprobs[0] is not None:
            top.setdefault(logprobs.tokens[0], logprobs.token_logprobs[0])
        return top

    def _logprobs(self, reply: Reply) -> Logprobs:
        """The first completion's logprobs (their shape was checked where the answer came in:
        answers.py)."""
        choices = reply.answer.choices
        if not choices or choices[0].logprobs is None:
            raise self._no_logprobs(reply.server)
        return choices[0].logprobs

    def _no_logprobs(self, server: int) -> RemoteError:
        return RemoteError(
            f"the PRM server at {self.client.roots[server]} returned no token logprobs; it must "
            "support `logprobs` on /v1/completions (llama-cpp-python: --logits_all true)"
        )

    def close(self) -> None:
        self.client.close()


def _share(good: float, bad: float) -> float:
    """P(good) / (P(good) + P(bad)) from their log-probabilities, without overflow for any finite
    pair."""
    d = good - bad
    if d >= 0:
        return 1.0 / (1.0 + math.exp(-d))
    e = math.exp(d)
    return e / (1.0 + e)


def _alike(top: dict[str, float], piece: str) -> float | None:
    """A server that spells tokens its own way (" Yes"): the likeliest key that is the piece."""
    return max([v for k, v in top.items() if k.strip() == piece.strip()], default=None)
