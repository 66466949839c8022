"""The feature tokens a head reads of its backbone's vocabulary."""

from __future__ import annotations

import numpy as np

from edgereason.heads.backbone import feature_tokens


def test_feature_tokens_are_twice_the_width_and_skip_special_ids():
    tokens = feature_tokens(n_vocab=1000, n_embd=64, exclude=frozenset({0, 1, 2}))
    assert len(tokens) == 128 and len(set(tokens.tolist())) == 128
    assert not {0, 1, 2} & set(tokens.tolist()) and (np.diff(tokens) > 0).all()
