"""Device-side top-k sampling on real SmolLM2 weights, through llama.cpp's backend samplers on the
CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.host_sampling import sample
from edgereason.backends.llamacpp import LlamaGenerator
from edgereason.backends.llamacpp.device_sampling import Candidates
from edgereason.backends.llamacpp.runtime import KVContext
from edgereason.config import SamplingParams
from edgereason.errors import ConfigError
from edgereason.protocols import BatchEntry
from edgereason.session.gpu import device_top_k

K = 40
QUESTION = "Janet has 16 eggs and eats 3. How many are left?"


def _prompt(model) -> list[int]:
    return model.tokenize(
        model.apply_chat_template([{"role": "user", "content": QUESTION}]), add_bos=model.add_bos
    )


def _host_row(model, tokens: list[int]) -> np.ndarray:
    """The whole logits row after `tokens`, from a fresh context laid out as the device one is."""
    ctx = KVContext(model, n_ctx=1024)
    rows: list[np.ndarray] = []
    try:
        ctx.decode(
            [DecodeItem(ctx.new_seq(), tokens, [(len(tokens) - 1, 0)])],
            lambda _, r: rows.append(r.copy()),
        )
    finally:
        ctx.close()
    return rows[0]


@pytest.fixture()
def device_gen(smollm2):
    g = LlamaGenerator(smollm2, kv_tokens=2048, device_top_k=K)
    yield g
    g.close()


def test_a_device_row_is_the_top_k_of_the_host_row(smollm2):
    tokens = _prompt(smollm2)
    full = _host_row(smollm2, tokens)
    ctx = KVContext(smollm2, n_ctx=1024, top_k=K)
    got: list[object] = []
    try:
        ctx.decode(
            [DecodeItem(ctx.new_seq(), tokens, [(len(tokens) - 1, 0)])], lambda _, r: got.append(r)
        )
    finally:
        ctx.close()
    row = got[0]
    assert isinstance(row, Candidates) and row.ids.shape == (K,) and row.logits.shape == (K,)
    assert set(row.ids.tolist()) == set(np.argsort(-full)[:K].tolist())
    np.testing.assert_allclose(row.logits, full[row.ids], atol=1e-4)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0, seed=5),
        SamplingParams(temperature=0.8, seed=6),
        SamplingParams(temperature=1.2, top_p=0.9, seed=7),
        SamplingParams(temperature=0.0),
    ],
)
def test_device_draws_are_host_draws_over_the_top_k(smollm2, device_gen, params):
    """The host rule with every token outside the top k removed, from the same per-row stream: same
    tokens."""
    tokens = _prompt(smollm2)
    full = _host_row(smollm2, tokens)
    masked = np.full_like(full, -np.inf)
    top = np.argsort(-full)[:K]
    masked[top] = full[top]
    want = sample(masked, 64, params)
    got = device_gen.step([BatchEntry(device_gen.new_seq(), tokens)], [64], params)[0]
    assert got == want
    # several independent draws, not one repeated
    assert params.temperature == 0.0 or len(set(got)) > 1


def test_device_draws_do_not_depend_on_the_batch_and_replay(smollm2, device_gen):
    """A row's draws come from its own stream: alone, beside other sequences, or rebuilt after a
    free.

    llama.cpp's CPU kernels are not batch-invariant (the rebuilt row's logits move by ~1e-3 with the
    batch), so a draw whose uniform lands next to a boundary may move; a stream shared or shifted
    between rows changes most."""
    tokens = _prompt(smollm2)
    params = SamplingParams(temperature=0.8, seed=11)
    alone = device_gen.new_seq()
    first = device_gen.step([BatchEntry(alone, tokens)], [16], params)[0]
    others = [device_gen.new_seq() for _ in range(3)]
    rebuilt = device_gen.new_seq()
    batch = [BatchEntry(s, _prompt(smollm2)[: -i - 1]) for i, s in enumerate(others)] + [
        BatchEntry(rebuilt, tokens)
    ]
    draws = device_gen.step(
        batch, [4, 4, 4, 16], [SamplingParams(temperature=0.8, seed=i) for i in range(3)] + [params]
    )
    assert sum(x == y for x, y in zip(draws[3], first)) >= 12
    device_gen.free(alone)
    device_gen.check_integrity()


def test_device_sampling_modes():
    assert device_top_k("auto", 40, n_gpu_layers=0) == 0  # CPU: host sampling
    assert device_top_k("auto", 40, n_gpu_layers=999) == 40
    assert device_top_k("on", 40, n_gpu_layers=0) == 40
    assert device_top_k("off", 40, n_gpu_layers=999) == 0
    with pytest.raises(ConfigError):
        device_top_k("gpu", 40, n_gpu_layers=0)
    with pytest.raises(ConfigError):
        device_top_k("on", 0, n_gpu_layers=0)


def test_the_session_setting_reaches_the_generator(smollm2_path, tmp_path, monkeypatch):
    from edgereason.session.opening import open_session
    from edgereason.session.settings import ModelSettings

    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    session = open_session(
        ModelSettings(
            model=str(smollm2_path),
            generator_kv_tokens=512,
            verifier_kv_tokens=512,
            device_sampling="on",
            device_top_k=20,
        )
    )
    try:
        g = session.generator
        assert g.device_top_k == 20
        tokens = _prompt(g.model)
        full = _host_row(g.model, tokens)
        draws = g.step(
            [BatchEntry(g.new_seq(), tokens)], [200], SamplingParams(temperature=2.0, seed=1)
        )[0]
    finally:
        session.close()
    assert set(draws) <= set(np.argsort(-full)[:20].tolist())
