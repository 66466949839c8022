"""The engine on real backends with SmolLM2 (llama.cpp; torch too where there is a GPU,
tests/engine/conftest.py): every preset, concurrent requests, integrity."""

from __future__ import annotations

import pytest
from real_backends import open_pair, open_with_slots

from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.events import NodeAdded, NodeScored, RequestDone
from edgereason.engine.loop import Engine
from edgereason.engine.policy import PRESETS, parse_policy
from edgereason.errors import ConfigError

PROBLEMS = [
    "Janet has 16 eggs and eats 3. How many are left?",
    "What is 12 times 3?",
    "Tom has 5 apples and buys 4.",
]


@pytest.fixture(scope="module")
def models(backend, smollm2_path):
    return open_pair(backend, smollm2_path, 8192)


def small(**kw) -> SearchConfig:
    base = dict(
        beams=4,
        width=2,
        max_steps=3,
        max_step_tokens=24,
        max_path_tokens=200,
        sampling=SamplingParams(seed=1),
    )
    base.update(kw)
    return SearchConfig(**base)


def test_solve_yields_a_well_formed_tree_and_record(models):
    events = []
    gen, ver = models
    engine = Engine(gen, ver, PRESETS["baseline"], on_event=events.append)
    result = engine.solve(PROBLEMS[0], small(), check=True)
    assert result.status == "done"
    assert 1 <= len(result.paths) <= 4
    ids = {n["id"] for n in result.tree}
    for n in result.tree:
        assert (n["parent"] is None) == (n["depth"] == 1) and (
            n["parent"] is None or n["parent"] in ids
        )
        assert n["status"] in {"pruned", "complete", "selected"}
    for p in result.paths:
        assert len(p.steps) <= 3 and all(s is not None and 0 <= s <= 1 for _, s in p.steps)
    assert [p.score for p in result.paths] == sorted((p.score for p in result.paths), reverse=True)
    m = result.metrics
    assert m.generated_tokens > 0 and m.prm_calls > 0 and m.prm_tokens > 0 and m.wall_s > 0
    assert 0 <= m.waiting_ratio <= 1 and m.goodput_tok_s <= m.throughput_tok_s
    assert any(isinstance(e, NodeScored) for e in events) and isinstance(events[-1], RequestDone)
    assert sum(isinstance(e, NodeAdded) for e in events) == len(result.tree) + 1
    assert gen.kv_used_tokens == 0 and ver.kv_used_tokens == 0  # everything freed


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("strategy", ["beam", "dvts", "best-of-n"])
def test_every_preset_finishes_concurrent_requests(models, preset, strategy):
    gen, ver = models
    engine = Engine(gen, ver, parse_policy(preset))
    reqs = [engine.submit(p, small(strategy=strategy)) for p in PROBLEMS]
    results = engine.run_until_done(check=True)
    assert len(results) == len(reqs)
    for r in results:
        assert r.status == "done", r.reason
        assert r.paths, "a finished request has final candidates"
        assert sum(p.potential for p in r.paths) <= 4
    assert gen.kv_used_tokens == 0


def test_greedy_presets_agree_on_the_answer(backend, smollm2_path):
    """With greedy sampling every candidate is the same path, so scheduling cannot change the
    answer.

    Deduplication is off here: it runs one row where the others run several identical rows, and
    llama.cpp's CPU kernels are not batch-invariant, so a near-tie can break differently.
    tests/engine/test_search_units.py checks the same equality with deduplication on, on the
    batch-invariant fake backend. Flash attention is off: with it the logits also depend on how a
    forward pass is split into ubatches."""
    gen, ver = open_pair(backend, smollm2_path, 4096, flash_attn=False)
    greedy = small(
        beams=2, width=2, max_steps=4, max_step_tokens=40, sampling=SamplingParams(temperature=0)
    )
    answers = set()
    for preset in ("baseline", "fasttts", "specscale:early_prune_perfect=false:dedup=false"):
        result = Engine(gen, ver, parse_policy(preset)).solve(PROBLEMS[1], greedy, check=True)
        answers.add((result.answer, "".join(t for t, _ in result.paths[0].steps)))
    gen.close()
    ver.close()
    assert len(answers) == 1


def test_more_beams_than_sequences_is_refused_at_submit(models):
    gen, ver = models
    engine = Engine(gen, ver, PRESETS["baseline"])
    with pytest.raises(ConfigError, match="--beams 260 is more than .* 256 sequences"):
        engine.submit(PROBLEMS[0], small(beams=260, width=2))
    assert not engine.requests and gen.live_seqs() == 0
    engine.solve(PROBLEMS[0], small(beams=256, width=2, max_steps=1, max_step_tokens=2))


@pytest.mark.parametrize("preset", ["baseline", "edge"])
def test_a_request_whose_beams_do_not_fit_the_free_sequences_waits_for_them(
    backend, smollm2_path, preset
):
    """bench --concurrency 8 --beams 64: all 8 started at once on 256 sequences, each kept the forks
    it got and waited for the rest, until the engine gave them up ("cannot make progress"). Here 16
    sequences, 3 x 8 beams."""
    gen, ver = open_with_slots(backend, smollm2_path, 4096, n_seq_max=16)
    engine = Engine(gen, ver, parse_policy(preset))
    config = small(beams=8, width=2, max_steps=2, max_step_tokens=8)
    reqs = [engine.submit(p, config) for p in PROBLEMS]
    assert [r.status for r in reqs] == ["running", "running", "waiting"]
    # a waiting request holds no sequence
    assert reqs[2].tree.root.seq is None and gen.live_seqs() == 2
    while reqs[2].status == "waiting":
        engine.step()
        engine.check_integrity()
    # it started once one finished and gave its sequences back
    assert any(r.result is not None for r in reqs[:2])
    engine.run_until_done(check=True)
    results = [r.result for r in reqs]
    gen.close()
    ver.close()
    assert [r.status for r in results] == ["done"] * 3, [r.reason for r in results]


def test_cancel_frees_everything(models):
    gen, ver = models
    engine = Engine(gen, ver, PRESETS["edge"])
    req = engine.submit(PROBLEMS[0], small())
    for _ in range(5):
        engine.step()
    engine.cancel(req.id)
    assert req.result is not None and req.result.status == "cancelled"
    assert gen.kv_used_tokens == 0 and not engine.busy
    engine.check_integrity()


@pytest.mark.parametrize("preset", ["baseline", "edge"])
def test_prm_holds_only_paths_live_nodes_can_extend(models, preset):
    """Pruned and finished paths leave the PRM's KV at once: on a unified cache every later call
    would attend over them. At most one held path per live node plus each request's question
    head."""
    gen, ver = models
    engine = Engine(gen, ver, parse_policy(preset))
    reqs = [engine.submit(p, small(max_steps=4)) for p in PROBLEMS[:2]]
    peak_scored = 0
    while engine.busy:
        engine.step()
        live = sum(
            1 for r in reqs for n in r.tree.steps() if n.alive and n.status.value != "complete"
        )
        running = sum(r.status == "running" for r in reqs)
        assert ver.ctx.live_seqs <= live + running
        peak_scored = max(
            peak_scored, sum(1 for r in reqs for n in r.tree.steps() if n.score is not None)
        )
    # the search scored enough nodes for the bound to bite
    assert peak_scored > ver.ctx.n_seq_max // 64
    assert ver.kv_used_tokens == 0


@pytest.mark.parametrize("preset", ["baseline", "edge"])
def test_diverse_selection_keeps_lineages_apart(models, preset):
    """--select diverse on real steps: wherever a beam step's competitors come from `keep` or more
    parents, the kept candidates are those parents' best, one each; a search still ends with its
    beams."""
    gen, ver = models
    engine = Engine(gen, ver, parse_policy(preset))
    cfg = small(
        beams=4,
        width=2,
        max_steps=4,
        select="diverse",
        sampling=SamplingParams(temperature=1.2, seed=4),
    )
    req = engine.submit(PROBLEMS[0], cfg)
    result = engine.run_until_done(check=True)[0]
    assert result.status == "done", result.reason
    spread = 0
    for group in req.groups.values():
        kept = [m for m in group.members if m.times_selected and not m.path_complete]
        parents = {id(m.parent) for m in group.members if m.step_done and not m.path_complete}
        if not group.selected or len(parents) < group.keep or len(kept) < group.keep:
            continue
        spread += 1
        assert len({id(m.parent) for m in kept}) == group.keep
        for m in kept:
            rivals = [
                o
                for o in group.members
                if o.parent is m.parent and o.score is not None and not o.path_complete
            ]
            assert m.score == max(o.score for o in rivals)
    assert spread >= 1, "no step had competitors from several parents: the test checked nothing"
