"""Token sampling next to the logits: `n` independent draws from one next-token distribution."""

from __future__ import annotations

import numpy as np

from edgereason.config import SamplingParams


def sample(logits: np.ndarray, n: int, params: SamplingParams, rng: np.random.Generator) -> list[int]:
    """logits: [n_vocab] float32. Returns n token ids drawn independently (greedy when temperature is 0).

    One cumulative sum serves all n draws: deduplicated candidates (potential n) pay for one distribution.
    """
    if n <= 0:
        return []
    if params.temperature == 0.0:
        return [int(np.argmax(logits))] * n
    scaled = logits.astype(np.float64) / params.temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    if params.top_p < 1.0:
        order = np.argsort(-probs)
        sorted_probs = probs[order]
        cdf = np.cumsum(sorted_probs)
        cut = int(np.searchsorted(cdf, params.top_p * cdf[-1])) + 1  # smallest prefix reaching top_p
        draws = np.searchsorted(cdf[:cut], rng.random(n) * cdf[cut - 1], side="right")
        return [int(order[min(i, cut - 1)]) for i in draws]
    cdf = np.cumsum(probs)
    draws = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    return [int(min(i, len(cdf) - 1)) for i in draws]
