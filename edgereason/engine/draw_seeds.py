"""Each row's random stream in a forward pass: one seed per (request seed, node, position), so draws
replay exactly after eviction and recompute, whatever else shares the batch. The seeds of a whole
pass are mixed in one array op (config.mix_seed's splitmix64, bit for bit), not row by row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.config import SamplingParams, mix_seed
from edgereason.engine.scheduler import PassRow

_GOLDEN, _M1, _M2 = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
)


def mix_seeds(*parts: np.ndarray) -> np.ndarray:
    """config.mix_seed over arrays: element i mixes parts[0][i], parts[1][i], ... (uint64; the
    products wrap modulo 2**64 as the hash wants)."""
    x = np.full(len(parts[0]), _GOLDEN, dtype=np.uint64)
    for part in parts:
        x = (x ^ part) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x ^= x >> np.uint64(31)
    return x >> np.uint64(1)


# below this many rows mix_seed row by row is the faster (the array op's fixed cost: about 50 us
# against 2.5 us a row on the CPU machine)
ARRAY_ROWS = 24


def draw_params(batch: Sequence[PassRow]) -> list[SamplingParams]:
    """Each row's sampling settings with its own stream: mix_seed(node seed, tokens in the node,
    whether the draws become children)."""
    n = len(batch)
    if n < ARRAY_ROWS:
        seeds = [mix_seed(w.node.seed, len(w.node.tokens), w.expand) for w in batch]
    else:
        seeds = mix_seeds(
            np.fromiter((w.node.seed for w in batch), dtype=np.uint64, count=n),
            np.fromiter((len(w.node.tokens) for w in batch), dtype=np.uint64, count=n),
            np.fromiter((w.expand for w in batch), dtype=np.uint64, count=n),
        ).tolist()
    return [w.request.config.sampling.with_seed(s) for w, s in zip(batch, seeds)]
