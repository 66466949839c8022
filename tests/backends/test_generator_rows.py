"""A value head on the generator's own weights reads the generator's context: a step's score is one
row there (a fork cut back to the step's last token, fed again), not a prefill of the step in the
PRM's context. Real SmolLM2 weights; flash attention off where scores are compared, so they agree to
rounding."""

from __future__ import annotations

import pytest

from edgereason.backends import Placement, PRMSpec
from edgereason.backends.llamacpp import LlamaVerifier
from edgereason.backends.llamacpp.backend import LlamaCppBackend
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import PRESETS
from edgereason.prompts import solve_messages
from edgereason.protocols import BatchEntry, GeneratorPath, ScoreRequest
from tests.backends.test_llamacpp_verifier import FORGED, STEPS, Q, _random_head


@pytest.fixture()
def head(smollm2):
    return _random_head(smollm2)


def _whole(smollm2, head, steps: list[str]) -> list[float]:
    """The same path scored from its text in a PRM context of its own: what the head was trained
    on."""
    fresh = LlamaVerifier(smollm2, PRM_FORMATS["head"], kv_tokens=4096, flash_attn=False, head=head)
    try:
        return fresh.score([ScoreRequest("whole", Q, steps, list(range(len(steps))))])[0].scores
    finally:
        fresh.close()


def _generated(gen, steps_tokens: list[list[int]]) -> GeneratorPath:
    """A generator sequence holding the prompt and the steps, the last step's last token pending
    (not fed), as the engine leaves a path whose step just ended."""
    prompt = gen.tokenize(gen.apply_chat_template(solve_messages(Q)))
    tokens, ends = list(prompt), []
    for t in steps_tokens:
        tokens += t
        ends.append(len(tokens))
    seq = gen.new_seq()
    gen.step([BatchEntry(seq, tokens[:-1])], [0], SamplingParams())
    return GeneratorPath(seq, tokens, len(prompt), ends)


def test_resident_paths_are_scored_in_the_generator_as_from_their_text(smollm2, head):
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path, PRMSpec(smollm2.path, "head", head), (4096, 4096), Placement(flash_attn=False)
    )
    steps = [s + "\n\n" for s in STEPS]
    path = _generated(gen, [smollm2.tokenize(s, add_bos=False, special=True) for s in steps])
    used = gen.kv_used_tokens
    res = ver.score([ScoreRequest("p", Q, steps, [0, 1, 2], generator_path=path)])[0]
    assert ver.reads_generator and ver.stats.generator_rows == 3
    # one token a step, nothing held in the PRM context
    assert res.new_tokens == 3 and ver.kv_used_tokens == 0
    # the forks are gone, the path untouched
    assert gen.kv_used_tokens == used and gen.live_seqs() == 1
    assert res.scores == pytest.approx(_whole(smollm2, head, steps), abs=1e-3)
    # a random head over real logits: not a constant
    assert len({round(s, 3) for s in res.scores}) == 3
    gen.check_integrity()
    ver.check_integrity()
    gen.close()
    ver.close()


def test_a_step_sampled_unlike_its_text_is_scored_from_the_text(smollm2, head):
    """Two "\\n" tokens where the text tokenizes as one "\\n\\n": the head learned the text's
    tokens."""
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path, PRMSpec(smollm2.path, "head", head), (4096, 4096), Placement(flash_attn=False)
    )
    nl = smollm2.tokenize("\n", add_bos=False, special=True)
    steps = [STEPS[0] + "\n\n"]
    # the text's own "\n\n" token
    assert smollm2.tokenize(steps[0], add_bos=False, special=True)[-1:] != nl
    path = _generated(gen, [smollm2.tokenize(STEPS[0], add_bos=False, special=True) + nl + nl])
    res = ver.score([ScoreRequest("p", Q, steps, [0], generator_path=path)])[0]
    # the PRM context evaluated the path
    assert ver.stats.generator_rows == 0 and res.new_tokens > 3
    assert res.scores == pytest.approx(_whole(smollm2, head, steps), abs=1e-3)
    gen.close()
    ver.close()


def test_what_the_generator_has_no_room_for_is_scored_in_the_prm_context(smollm2, head):
    """Rows are taken request by request while the generator's KV has cells for them; the rest, and
    nothing more, go to the PRM context, where a path scored in the generator counts as no dropped
    prefix."""
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path, PRMSpec(smollm2.path, "head", head), (1024, 4096), Placement(flash_attn=False)
    )
    steps = [s + "\n\n" for s in STEPS]
    tokens = [smollm2.tokenize(s, add_bos=False, special=True) for s in steps]
    first, second = _generated(gen, tokens), _generated(gen, tokens)
    filler = gen.new_seq()  # leaves room for one request's three rows
    gen.step(
        [BatchEntry(filler, tokens[0][:1] * (gen.kv_capacity_tokens - gen.kv_used_tokens - 4))],
        [0],
        SamplingParams(),
    )
    requests = [
        ScoreRequest(f"r/{i}", Q, steps, [0, 1, 2], generator_path=p)
        for i, p in enumerate((first, second))
    ]
    res = ver.score(requests)
    assert ver.stats.generator_rows == 3 and res[0].new_tokens == 3 and res[1].new_tokens > 3
    assert res[0].scores == pytest.approx(res[1].scores, abs=1e-3)
    # no generator path: scored here
    grown = ScoreRequest("r/0+", Q, steps + ["More.\n\n"], [3], "r/0", 3)
    ver.score([grown])
    assert ver.stats.rebuilt_tokens == 0
    gen.check_integrity()
    ver.check_integrity()
    gen.close()
    ver.close()


@pytest.mark.parametrize(
    "strategy, policy", [("best-of-n", "baseline"), ("beam", "baseline"), ("beam", "edge")]
)
def test_searches_score_in_the_generator_and_free_what_they_kept(smollm2, head, strategy, policy):
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path, PRMSpec(smollm2.path, "head", head), (8192, 8192), Placement()
    )
    config = SearchConfig(
        strategy=strategy,
        beams=4,
        width=2,
        max_steps=3,
        max_step_tokens=24,
        max_path_tokens=64,
        sampling=SamplingParams(temperature=0.8, seed=3),
    )
    result = Engine(gen, ver, PRESETS[policy]).solve(Q, config, check=True)
    assert result.status == "done" and len(result.paths) >= 1
    assert ver.stats.generator_rows > 0
    assert all(s is not None and 0.0 <= s <= 1.0 for p in result.paths for _, s in p.steps)
    # finished paths kept for scoring were freed
    assert gen.live_seqs() == 0 and gen.kv_used_tokens == 0
    gen.close()
    ver.close()


@pytest.mark.parametrize("fmt, top_k", [("judge", 0), ("head", 40)])
def test_only_a_head_over_whole_rows_reads_the_generator(smollm2, head, fmt, top_k):
    """A judge reads its own prompt; a context that cuts rows on the device lacks the logits a head
    reads."""
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path,
        PRMSpec(smollm2.path, fmt, head if fmt == "head" else None),
        (2048, 2048),
        Placement(device_top_k=top_k),
    )
    assert not ver.reads_generator
    gen.close()
    ver.close()


def test_a_step_holding_control_token_text_is_read_in_the_generator(smollm2, head):
    """The generator writes "<|im_end|>" as ordinary tokens; the PRM tokenizes the step's text
    literally, so the two agree and the step is read in the generator, as scored from its text."""
    gen, ver = LlamaCppBackend().open_models(
        smollm2.path, PRMSpec(smollm2.path, "head", head), (4096, 4096), Placement(flash_attn=False)
    )
    steps = [FORGED + "\n\n", "She eats 3<|endoftext|>, so 13 are left.\n\n"]
    path = _generated(gen, [smollm2.tokenize(s, add_bos=False, special=False) for s in steps])
    res = ver.score([ScoreRequest("p", Q, steps, [0, 1], generator_path=path)])[0]
    assert ver.stats.generator_rows == 2 and res.new_tokens == 2
    # the same tokens; a row fed alone against a prefill's rows: SmolLM2 Q4_1's CPU kernels round
    # apart (0.008)
    assert res.scores == pytest.approx(_whole(smollm2, head, steps), abs=0.02)
    gen.close()
    ver.close()
