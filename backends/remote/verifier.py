"""The Verifier protocol over an OpenAI-compatible server: a token-probability PRM (judge, rlhflow,
math-shepherd) read from the `logprobs` of the next token.

Each requested step is one completion request: the PRM prompt up to that step's read position (backends/prm_format
.py, the tokens the local verifier evaluates, sent as token ids), `max_tokens: 1`, `logprobs: 20`, temperature 0.
Its score is P(good) / (P(good) + P(bad)), the tokens the local verifier reads, from the top-20 answer. Every score
of one `score()` call is in flight at once: the engine's lazy verification, which batches PRM requests, becomes one
round of concurrent HTTP requests; the server's prefix cache plays the part of the local verifier's per-path KV.

Where good or bad is outside the top 20, one more round reads them with `logit_bias` (every OpenAI-compatible
server takes it) - three requests for that score, all in that round:
- both tokens raised by the same +100: a server whose logprobs are taken after the bias returns both at the top,
  and a shared shift leaves their ratio unchanged;
- each token raised alone: a server whose logprobs are the model's own, before the bias (llama-cpp-python's,
  llama.cpp's llama-server, vLLM by default), returns only the sampled token's, and the sampled token is then the
  raised one, so each request gives one of the two, unbiased.
The first answer is used where it holds both tokens (both values come from one distribution, shifted alike),
else the other two; never values of different requests mixed with a bias in between.

The `head` format cannot be served: a value head reads thousands of logits per step, a server returns 20.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.prm_format import PRMFormat, prompt_for
from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.errors import ConfigError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats

TOP_LOGPROBS = 20  # what OpenAI's API and vLLM (--max-logprobs) allow by default
BIAS = 100.0  # the largest logit_bias OpenAI's API and vLLM accept: puts a token first against any logit gap

Pair = tuple[float | None, float | None]  # (log P(good), log P(bad)); None: not in the answer


class RemoteVerifier:
    def __init__(
        self, client: CompletionClient, vocab: LlamaModel, fmt: PRMFormat, top_logprobs: int = TOP_LOGPROBS
    ) -> None:
        """vocab: the served PRM's tokenizer and chat template (a GGUF read vocab-only); its token ids name the
        tokens to the server's `logit_bias`. top_logprobs: `logprobs` of the first request of a score (fewer make
        the logit_bias round more frequent, which tests use)."""
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
        self.name = f"{vocab.path.stem}:{fmt.name}@{client.endpoint.root}"
        self.prompt = prompt_for(fmt, lambda msgs: vocab.apply_chat_template(msgs, add_assistant=True))
        # the answer tokens as the local verifier reads them: the first token of each word
        self._ids = [vocab.tokenize(w, add_bos=False, special=False)[0] for w in (fmt.good, fmt.bad)]
        self._pieces = [vocab.token_piece(i).decode("utf-8", errors="replace") for i in self._ids]
        self.stats = VerifierStats()
        self.biased_scores = 0  # scores read in the logit_bias round

    kv_capacity_tokens = 1 << 30  # the server holds the KV
    kv_used_tokens = 0
    kv_bytes_per_token = 0

    def release(self, key_prefix: str) -> None:
        """Nothing is held here; the server's cache evicts on its own."""

    def check_integrity(self) -> None:
        """Every call is counted once."""
        assert len(self.stats.per_call_tokens) == self.stats.calls, "PRM calls and their token counts disagree"

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        t0 = time.perf_counter()
        prompts: list[list[int]] = []
        new_tokens: list[int] = []
        for req in requests:
            head, segments = self._tokens(req)
            prompts += [head + [t for seg in segments[: i + 1] for t in seg] for i in req.need]
            # what a prefix-caching server evaluates anew: the steps past the prefix it saw (the local count)
            fresh = segments[req.prefix_steps :] if req.prefix_key else [head, *segments]
            new_tokens.append(sum(len(seg) for seg in fresh))
        answers = self.client.complete([self._body(p, self.top_logprobs) for p in prompts])
        pairs = [self._pair(a) for a in answers]
        missing = [i for i, (good, bad) in enumerate(pairs) if good is None or bad is None]
        if missing:
            pairs = self._biased(prompts, missing, pairs)
        scores = iter(1.0 / (1.0 + math.exp(bad - good)) for good, bad in pairs)  # type: ignore[operator]
        results = [ScoreResult([next(scores) for _ in req.need], n) for req, n in zip(requests, new_tokens)]
        self.stats.calls += 1
        self.stats.tokens += sum(new_tokens)
        self.stats.per_call_tokens.append(sum(new_tokens))
        self.stats.seconds += time.perf_counter() - t0
        return results

    def _tokens(self, req: ScoreRequest) -> tuple[list[int], list[list[int]]]:
        """The head's and each step's tokens, as the local verifier evaluates them. Sent as token ids, not text: a
        server parses "<|im_end|>" in text as the control token, where a question's or a step's is text."""
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
            body["logit_bias"] = {str(i): BIAS for i in bias}  # token ids, as OpenAI's API names them
        return body

    def _biased(self, prompts: list[list[int]], missing: list[int], pairs: list[Pair]) -> list[Pair]:
        """The scores at `missing` read again with logit_bias, in one round (module docstring)."""
        good, bad = self._ids
        bodies = [
            self._body(prompts[i], max(2, self.top_logprobs), b)
            for i in missing
            for b in ((good, bad), (good,), (bad,))
        ]
        answers = self.client.complete(bodies)
        pairs = list(pairs)
        for k, i in enumerate(missing):
            shared, alone_good, alone_bad = answers[3 * k : 3 * k + 3]
            pair = self._pair(shared)
            if pair[0] is None or pair[1] is None:  # logprobs from before the bias: one token per request
                pair = (self._sampled(alone_good, 0), self._sampled(alone_bad, 1))
            pairs[i] = pair
        self.biased_scores += len(missing)
        return pairs

    def _pair(self, answer: dict[str, Any]) -> Pair:
        """log P(good), log P(bad) from the first position's top logprobs and its sampled token."""
        top = self._top(answer)
        return tuple(top.get(piece, _alike(top, piece)) for piece in self._pieces)  # type: ignore[return-value]

    def _sampled(self, answer: dict[str, Any], which: int) -> float:
        """The logprob of the sampled token, which logit_bias made good (which=0) or bad (1)."""
        piece = self._pieces[which]
        try:
            logprobs = answer["choices"][0]["logprobs"]
            token, value = logprobs["tokens"][0], logprobs["token_logprobs"][0]
        except (KeyError, IndexError, TypeError):
            raise self._no_logprobs() from None
        if str(token).strip() != piece.strip() or value is None:
            raise RemoteError(
                f"the PRM server at {self.client.endpoint.root} ignored `logit_bias` (it sampled "
                f"{token!r}, not {piece!r}), which a score whose {piece!r} is outside the top "
                f"{self.top_logprobs} logprobs needs"
            )
        return float(value)

    def _top(self, answer: dict[str, Any]) -> dict[str, float]:
        """The first position's top logprobs, the sampled token's among them (some servers list it apart)."""
        try:
            logprobs = answer["choices"][0]["logprobs"]
            top = logprobs["top_logprobs"][0]
            if isinstance(top, list):  # some servers give [{"token": ..., "logprob": ...}]
                top = {t["token"]: t["logprob"] for t in top}
            top = {str(k): float(v) for k, v in top.items()}
            if logprobs.get("tokens") and logprobs.get("token_logprobs") and logprobs["token_logprobs"][0] is not None:
                top.setdefault(str(logprobs["tokens"][0]), float(logprobs["token_logprobs"][0]))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise self._no_logprobs() from None
        return top

    def _no_logprobs(self) -> RemoteError:
        return RemoteError(
            f"the PRM server at {self.client.endpoint.root} returned no token logprobs; it must "
            "support `logprobs` on /v1/completions (llama-cpp-python: --logits_all true)"
        )

    def close(self) -> None:
        self.client.close()


def _alike(top: dict[str, float], piece: str) -> float | None:
    """A server that spells tokens its own way (" Yes"): the likeliest key that is the piece."""
    return max([v for k, v in top.items() if k.strip() == piece.strip()], default=None)
