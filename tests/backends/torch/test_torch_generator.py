"""The torch Generator on real SmolLM2 weights (CPU, float32), against the llama.cpp backend."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp import LlamaGenerator
from edgereason.backends.torch.generator import TorchGenerator
from edgereason.config import SamplingParams
from edgereason.prompts import solve_messages
from edgereason.protocols import BatchEntry

GREEDY = SamplingParams(temperature=0.0)
MULTIPLY = "What is 12 times 7? Explain step by step."
QUESTION = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins with four. "
    "How many are left?"
)


@pytest.fixture()
def gen(torch_smollm2):
    g = TorchGenerator(torch_smollm2, kv_tokens=2048)
    yield g
    g.close()


def _greedy(g, prompt: list[int], n: int) -> list[int]:
    seq = g.new_seq()
    out = g.step([BatchEntry(seq, prompt)], [1], GREEDY)[0]
    while len(out) < n:
        out += g.step([BatchEntry(seq, out[-1:])], [1], GREEDY)[0]
    g.free(seq)
    return out


def test_greedy_tokens_equal_llamacpp_for_64_tokens(gen, smollm2):
    """Free-running greedy decoding, 64 tokens, token for token. Where llama.cpp's top two logits
    are closer than its 8-bit activation rounding moves them (up to ~0.7 on SmolLM2), the two paths
    may part: the project's solve prompt for QUESTION does at its first token (llama.cpp's margin
    0.17). The next test covers every position."""
    llama = LlamaGenerator(smollm2, kv_tokens=2048)
    try:
        prompt = llama.tokenize(llama.apply_chat_template([{"role": "user", "content": MULTIPLY}]))
        assert (
            gen.tokenize(gen.apply_chat_template([{"role": "user", "content": MULTIPLY}])) == prompt
        )
        want = _greedy(llama, prompt, 64)
    finally:
        llama.close()
    assert _greedy(gen, prompt, 64) == want


def test_next_token_agrees_with_llamacpp_wherever_llamacpp_is_decisive(gen, smollm2):
    """llama.cpp's greedy path fed to both backends in one pass: at every position where llama.cpp's
    best token leads its second by more than its rounding moves logits, torch picks the same
    token."""
    llama = LlamaGenerator(smollm2, kv_tokens=2048)
    try:
        prompt = llama.tokenize(llama.apply_chat_template(solve_messages(QUESTION)))
        path = _greedy(llama, prompt, 64)
        seq, rows = llama.new_seq(), {}
        feed = prompt + path[:-1]
        outputs = [(len(prompt) - 1 + i, i) for i in range(len(path))]
        llama.ctx.decode(
            [DecodeItem(seq, feed, outputs)], lambda i, row: rows.__setitem__(i, row.copy())
        )
    finally:
        llama.close()
    _, logits = gen.ctx.forward([DecodeItem(gen.new_seq(), feed, outputs)])
    mine = logits.argmax(1).tolist()
    margins = [float(np.diff(np.sort(rows[i])[-2:])[0]) for i in range(len(path))]
    decisive = [i for i, m in enumerate(margins) if m > 1.0]
    assert len(decisive) >= 40
    assert [mine[i] for i in decisive] == [path[i] for i in decisive]


def _logits(g: TorchGenerator, seq: int, tokens: list[int]) -> np.ndarray:
    _, rows = g.ctx.forward([DecodeItem(seq, tokens, [(len(tokens) - 1, 0)])])
    return rows[0].numpy()


def test_a_fork_cut_back_continues_as_a_fresh_sequence_would(gen):
    """KV shared by fork and truncate gives the logits of the same tokens evaluated from scratch."""
    prompt = gen.tokenize(gen.apply_chat_template(solve_messages(QUESTION)))
    parent = gen.new_seq()
    gen.step([BatchEntry(parent, prompt + [28, 1848, 216])], [0], GREEDY)
    child = gen.fork(parent)
    assert gen.kv_used_tokens == len(prompt) + 3
    gen.truncate(child, len(prompt))
    tail = [2068, 536, 451]
    forked = _logits(gen, child, tail)
    assert gen.kv_used_tokens == len(prompt) + 6  # only the child's new tokens took cells
    fresh = gen.new_seq()
    scratch = _logits(gen, fresh, prompt + tail)
    # f16 KV of passes of other shapes; a bug: 0.1+
    np.testing.assert_allclose(forked, scratch, atol=5e-3)
    gen.check_integrity()


def test_draws_for_a_seed_do_not_depend_on_the_batch(gen):
    prompt = gen.tokenize(gen.apply_chat_template(solve_messages(QUESTION)))
    mine = SamplingParams(temperature=1.0, seed=77)
    seq = gen.new_seq()
    alone = gen.step([BatchEntry(seq, prompt)], [5], mine)[0]
    gen.free(seq)
    other = gen.new_seq()
    gen.step([BatchEntry(other, prompt[:20])], [0], GREEDY)
    seq = gen.new_seq()
    busy = gen.step(
        [
            BatchEntry(other, [28, 1848]),
            BatchEntry(seq, prompt),
            BatchEntry(gen.new_seq(), prompt[:9]),
        ],
        [3, 5, 2],
        [SamplingParams(seed=1), mine, SamplingParams(temperature=0.5, seed=3)],
    )
    assert busy[1] == alone and len(busy[0]) == 3 and len(busy[2]) == 2
    # five draws at temperature 1 from one stream, not one token repeated
    assert len(set(alone)) > 1


def test_integrity_check_reads_the_device_tables(gen):
    seq = gen.new_seq()
    gen.step([BatchEntry(seq, [1, 2, 3])], [0], GREEDY)
    child = gen.fork(seq)
    gen.check_integrity()
    # attention would read another cell than the accounting holds
    gen.ctx.cache.device_tables.cells[child, 1] += 1
    with pytest.raises(AssertionError, match=f"seq {child}: device table drifted"):
        gen.check_integrity()
