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
    if n <= 0:
        return []
    if params.temperature == 0.0:
        return [int(np.argmax(logits))] * n
    best = float(logits.max())
    ids = np.flatnonzero(logits >= best - CUTOFF * params.temperature)  # [k], k << n_vocab
    probs = np.exp((logits[ids].astype(np.float64) - best) / params.temperature)
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        ids, probs = ids[order], probs[order]
        cdf = np.cumsum(probs)
        cut = int(np.searchsorted(cdf, params.top_p * cdf[-1])) + 1  # smallest prefix reaching top_p
        ids, cdf = ids[:cut], cdf[:cut]
    else:
        cdf = np.cumsum(probs)
    draws = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    return [int(ids[min(i, len(ids) - 1)]) for i in draws]
