"""Token sampling next to the logits: `n` independent draws from one next-token distribution."""

from __future__ import annotations

import numpy as np

from edgereason.config import SamplingParams

# Tokens more than this far below the best logit (in units of temperature) are left out: each has under e^-30 of
# its probability, so all of a 152k vocabulary together miss less than 2e-8 of the mass. Sampling then costs one
# comparison pass over the vocabulary instead of exp and a cumulative sum over it (5 ms a row for Qwen on CPU).
CUTOFF = 30.0


def sample(logits: np.ndarray, n: int, params: SamplingParams, rng: np.random.Generator) -> list[int]:
    """logits: [n_vocab] float32. Returns n token ids drawn independently (greedy when temperature is 0).

    One cumulative sum serves all n draws: deduplicated candidates (potential n) pay for one distribution.
    """
    return _sample(logits, None, n, params, rng)


def sample_candidates(ids: np.ndarray, logits: np.ndarray, n: int, params: SamplingParams,
                      rng: np.random.Generator) -> list[int]:
    """ids: [k] token ids in any order (a device-side top-k), logits: [k] their logits.

    Rule: the same draws, from the same rng, as `sample` over the whole row with every token outside `ids` left
    out: the candidates are put in vocabulary order, as `sample` keeps its tokens, and go through the same cutoff,
    top_p and cumulative sum. Probabilities are renormalised over the candidates.
    """
    order = np.argsort(ids, kind="stable")
    return _sample(logits[order], ids[order], n, params, rng)


def _sample(logits: np.ndarray, ids: np.ndarray | None, n: int, params: SamplingParams,
            rng: np.random.Generator) -> list[int]:
    """logits: [m]; ids: [m] ascending token ids of those logits, or None when logits is the whole vocabulary."""
    if n <= 0:
        return []
    if params.temperature == 0.0:
        best_at = int(np.argmax(logits))
        return [best_at if ids is None else int(ids[best_at])] * n
    best = float(logits.max())
    keep = np.flatnonzero(logits >= best - CUTOFF * params.temperature)  # [k], k << n_vocab
    probs = np.exp((logits[keep].astype(np.float64) - best) / params.temperature)
    tokens = keep if ids is None else ids[keep]
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        tokens, probs = tokens[order], probs[order]
        cdf = np.cumsum(probs)
        cut = int(np.searchsorted(cdf, params.top_p * cdf[-1])) + 1  # smallest prefix reaching top_p
        tokens, cdf = tokens[:cut], cdf[:cut]
    else:
        cdf = np.cumsum(probs)
    draws = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    return [int(tokens[min(i, len(tokens) - 1)]) for i in draws]
