"""engine/draw_seeds.py: a pass's seeds mixed in one array op are config.mix_seed's, bit for bit."""

from __future__ import annotations

import random

import numpy as np

from edgereason.config import SamplingParams, SearchConfig, mix_seed
from edgereason.engine.draw_seeds import draw_params, mix_seeds
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
    req = Request("r", "q", SearchConfig(sampling=SamplingParams(0.6, 0.9, seed=3)), [1, 2])
    req.tree.root.seed = mix_seed(3)
    a = req.tree.add_child(req.tree.root, seed=mix_seed(req.tree.root.seed, 2, 0))
    b = req.tree.add_child(req.tree.root, seed=mix_seed(req.tree.root.seed, 2, 1))
    a.tokens = [5, 6, 7]
    batch = [PassRow(req, a, [7], 1, False), PassRow(req, b, [4], 4, True)]
    assert draw_params(batch) == [
        SamplingParams(0.6, 0.9, mix_seed(a.seed, 3, False)),
        SamplingParams(0.6, 0.9, mix_seed(b.seed, 0, True)),
    ]
