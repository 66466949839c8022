"""The whole engine on the torch backend (CPU): a search to the end with integrity checks after
every step."""

from __future__ import annotations

import pytest

from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import PRESETS

pytestmark = pytest.mark.slow  # a whole search in float32 torch on 2 shared cores: minutes


def test_a_search_runs_to_the_end_on_torch_and_frees_everything(smollm2_path):
    judge = PRMSpec(smollm2_path, "judge")
    gen, ver = load_backend("torch").open_models(smollm2_path, judge, (4096, 4096), Placement())
    config = SearchConfig(
        beams=4,
        width=2,
        max_steps=3,
        max_step_tokens=24,
        max_path_tokens=200,
        sampling=SamplingParams(seed=1),
    )
    result = Engine(gen, ver, PRESETS["baseline"]).solve(
        "Janet has 16 eggs and eats 3. How many are left?", config, check=True
    )
    assert result.status == "done" and 1 <= len(result.paths) <= 4
    assert all(s is not None and 0 <= s <= 1 for p in result.paths for _, s in p.steps)
    assert result.metrics.generated_tokens > 0 and result.metrics.prm_calls > 0
    assert gen.kv_used_tokens == 0 and ver.kv_used_tokens == 0
