"""engine/draw_seeds.py: a pass's seeds mixed in one array op are config.mix_seed's, bit for bit."""

from __future__ import annotations

import random

import numpy as np

from edgereason.config import SamplingParams, SearchConfig, mix_seed
from edgereason.engine.draw_seeds import ARRAY_ROWS, draw_params, mix_seeds
from edgereason.engine.request import Request
from edgereason.engine.scheduler import PassRow


def test_mix_seeds_is_mix_seed_for_every_element():
    rng = random.Random(7)
    seeds = [0, 1, (1 << 63) - 1, *(rng.getrandbits(63) for _ in range(200))]
    lengths = [rng.randrange(0, 5000) for _ in seeds]
    expand = [rng.randrange(2) for _ in seeds]
    got = mix_seeds(*(np.array(p, dtype=np.uint64) for p in (seeds, lengths, expand))).tolist()
    assert got == [mix_seed(*p) for p in zip(seeds, lengths, expand)]


def test_each_row_gets_its_request_settings_with_its_own_stream():
    """A small pass (mix_seed row by row) and a large one (one array op) alike."""
    req = Request("r", "q", SearchConfig(sampling=SamplingParams(0.6, 0.9, seed=3)), [1, 2])
    req.tree.root.seed = mix_seed(3)
    for rows in (2, ARRAY_ROWS + 3):
        batch = []
        for k in range(rows):
            node = req.tree.add_child(req.tree.root, seed=mix_seed(req.tree.root.seed, 2, k))
            node.tokens = list(range(k % 5))
            batch.append(PassRow(req, node, [7], 1 + k % 2, k % 2 == 1))
        assert draw_params(batch) == [
            SamplingParams(0.6, 0.9, mix_seed(w.node.seed, len(w.node.tokens), w.expand))
            for w in batch
        ]
