"""The torch backend's decode points (what `--policy auto` reads a pass cost from), on SmolLM2 on
the CPU."""

from __future__ import annotations

from edgereason.backends import load_backend
from edgereason.backends.torch.generator import TorchGenerator


def test_a_session_generator_measures_its_pass_cost(torch_smollm2):
    backend = load_backend("torch")
    generator = TorchGenerator(torch_smollm2, 512)
    try:
        points = backend.decode_points(generator, (1, 4), 2, None)
    finally:
        generator.close()
    assert [n for n, _ in points] == [1, 4] and all(rate > 0 for _, rate in points)
    # not a torch generator: nothing to measure
    assert backend.decode_points(object(), (1, 4), 2, None) is None


def test_prefill_points_of_a_prm(torch_smollm2):
    from edgereason.backends.torch.measure import measure_prefill

    # 100: one full sequence of 64 and one of 36
    points = measure_prefill(torch_smollm2, (32, 100), reps=1)
    assert [b for b, _ in points] == [32, 100] and all(rate > 0 for _, rate in points)
