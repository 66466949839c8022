"""The Verifier protocol over an OpenAI-compatible server: a token-probability PRM (judge, rlhflow,
math-shepherd) read from the `logprobs` of the next token.

Each requested step is one completion request: the PRM prompt up to that step's read position (backends/prm_format
.py, the same text the local verifier evaluates), `max_tokens: 1`, `logprobs: 20`, temperature 0. Its score is
P(good) / (P(good) + P(bad)), the tokens the local verifier reads, from the top-20 answer; where one of them is
outside the top 20, a second request reads its own logprob from the prompt with it appended (`echo`). Every score
of one `score()` call is in flight at once: the engine's lazy verification, which batches PRM requests, becomes one
round of concurrent HTTP requests; the server's prefix cache plays the part of the local verifier's per-path KV.

The `head` format cannot be served: a value head reads thousands of logits per step, a server returns 20.
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.prm_format import PRMFormat, prompt_for
from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.errors import ConfigError
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats

TOP_LOGPROBS = 20


class RemoteVerifier:
    def __init__(self, client: CompletionClient, vocab: LlamaModel, fmt: PRMFormat) -> None:
        """vocab: the served PRM's tokenizer and chat template (a GGUF read vocab-only)."""
        if fmt.prompt == "solve":
            raise ConfigError(f"--prm-format {fmt.name} reads thousands of logits per step and a server returns "
                              f"{TOP_LOGPROBS}: use judge, rlhflow or math-shepherd with a remote PRM")
        self.client = client
        self.vocab = vocab
        self.fmt = fmt
        self.name = f"{vocab.path.stem}:{fmt.name}@{client.endpoint.root}"
        self.prompt = prompt_for(fmt, lambda msgs: vocab.apply_chat_template(msgs, add_assistant=True))
        # the answer tokens as the local verifier reads them: the first token of each word
        self._pieces = [vocab.token_piece(vocab.tokenize(w, add_bos=False, special=False)[0]).decode(
            "utf-8", errors="replace") for w in (fmt.good, fmt.bad)]
        self.stats = VerifierStats()

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
        prompts, new_tokens = [], []
        for req in requests:
            segments = self.prompt.segments(req.steps, 0)
            head = self.prompt.head(req.question)
            prompts += [head + "".join(segments[:i + 1]) for i in req.need]
            # what a prefix-caching server evaluates anew: the steps past the prefix it saw (the local count)
            fresh = "".join(segments[req.prefix_steps:]) if req.prefix_key else head + "".join(segments)
            new_tokens.append(len(self.vocab.tokenize(fresh, add_bos=False, special=True)))
        answers = self.client.complete([{"prompt": p, "max_tokens": 1, "logprobs": TOP_LOGPROBS,
                                         "temperature": 0.0, "cache_prompt": True} for p in prompts])
        pairs = [self._top_pair(a) for a in answers]  # (log P(good), log P(bad)), None where not in the top 20
        missing = [(i, w) for i, pair in enumerate(pairs) for w in (0, 1) if pair[w] is None]
        if missing:  # outside the top 20: the answer token's own logprob, from the prompt with it appended
            echoed = self.client.complete([{"prompt": prompts[i] + self._pieces[w], "max_tokens": 1, "echo": True,
                                            "logprobs": 1, "temperature": 0.0, "cache_prompt": True}
                                           for i, w in missing])
            for (i, w), answer in zip(missing, echoed):
                pair = list(pairs[i])
                pair[w] = self._echoed(answer, self._pieces[w])
                pairs[i] = (pair[0], pair[1])
        scores = iter(1.0 / (1.0 + math.exp(bad - good)) for good, bad in pairs)  # type: ignore[operator]
        results = [ScoreResult([next(scores) for _ in req.need], n) for req, n in zip(requests, new_tokens)]
        self.stats.calls += 1
        self.stats.tokens += sum(new_tokens)
        self.stats.per_call_tokens.append(sum(new_tokens))
        self.stats.seconds += time.perf_counter() - t0
        return results

    def _top_pair(self, answer: dict[str, Any]) -> tuple[float | None, float | None]:
        try:
            top = answer["choices"][0]["logprobs"]["top_logprobs"][0]
            if isinstance(top, list):  # some servers give [{"token": ..., "logprob": ...}]
                top = {t["token"]: t["logprob"] for t in top}
            top = {str(k): float(v) for k, v in top.items()}
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise RemoteError(f"the PRM server at {self.client.endpoint.root} returned no token logprobs; it must "
                              "support `logprobs` on /v1/completions (llama-cpp-python: --logits_all true)") from None
        good, bad = (top.get(piece, _alike(top, word)) for piece, word in
                     zip(self._pieces, (self.fmt.good, self.fmt.bad)))
        return good, bad

    def _echoed(self, answer: dict[str, Any], piece: str) -> float:
        """The logprob of `piece`, the last prompt token of an echoed request (the completion's one token after)."""
        try:
            logprobs = answer["choices"][0]["logprobs"]
            tokens, values = logprobs["tokens"], logprobs["token_logprobs"]
            if tokens[-2].strip() != piece.strip() or values[-2] is None:
                raise ValueError(tokens[-2])
            return float(values[-2])
        except (KeyError, IndexError, TypeError, ValueError):
            raise RemoteError(f"the PRM server at {self.client.endpoint.root} did not echo the prompt's logprobs "
                              f"(`echo` with `logprobs`), which a score whose {piece!r} is outside the top "
                              f"{TOP_LOGPROBS} needs") from None

    def close(self) -> None:
        self.client.close()


def _alike(top: dict[str, float], word: str) -> float | None:
    """A server that spells tokens its own way (" Yes"): the likeliest key that is the word."""
    return max([v for k, v in top.items() if k.strip() == word.strip()], default=None)
