"""The sample search that measures the workload, on SmolLM2: concurrent searches are measured
together."""

from __future__ import annotations

import pytest

from edgereason.backends.llamacpp.profiler_probes import profiled_generator, profiled_prm
from edgereason.errors import ConfigError
from edgereason.profiler.sample import SAMPLE_PROBLEMS, sample_search


@pytest.mark.slow
def test_concurrent_searches_are_sampled_together(smollm2_path):
    def sample(requests: int):
        gen, prm = (
            profiled_generator(smollm2_path, 0, None),
            profiled_prm(smollm2_path, True, "judge", None, 0, None),
        )
        return sample_search(
            gen, prm, beams=2, width=2, steps=2, max_step_tokens=16, requests=requests
        )

    one, two = sample(1), sample(2)
    assert 0 < one.step_tokens <= 16 and 0 < one.head_tokens < one.prompt_tokens + 200
    # the second search runs on the second problem, at the same time: both models hold more than for
    # the first
    assert SAMPLE_PROBLEMS[0] != SAMPLE_PROBLEMS[1]
    assert one.generator_peak_tokens < two.generator_peak_tokens
    assert one.verifier_peak_tokens < two.verifier_peak_tokens


def test_a_sample_search_of_more_beams_than_sequences_is_one_clear_error(smollm2_path):
    """memory-profile --beams 4096 --width 4096: the search failed, measured nothing, and the split
    model's ValueError was a traceback after the minute of measuring curves; the engine now refuses
    it at submit."""
    gen, prm = (
        profiled_generator(smollm2_path, 0, None),
        profiled_prm(smollm2_path, True, "judge", None, 0, None),
    )
    with pytest.raises(
        ConfigError, match=r"--beams 4096 is more than .* 256 sequences, one a beam"
    ):
        sample_search(gen, prm, beams=4096, width=4096, steps=2, max_step_tokens=16)
