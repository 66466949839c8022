"""The throughput curves on the real SmolLM2: the generator's decode curve measured as a session's
rows come back, whole or cut to their top k on the device (what a GPU session does)."""

from __future__ import annotations

import pytest

from edgereason.backends.llamacpp.measure import measure_decode


@pytest.mark.parametrize("top_k", [0, 20])
def test_decode_curve_with_whole_rows_and_with_the_device_cut(smollm2, top_k):
    points = measure_decode(smollm2, [1, 2], steps=2, top_k=top_k)
    assert [n for n, _ in points] == [1, 2]
    assert all(tok_s > 0 for _, tok_s in points)
