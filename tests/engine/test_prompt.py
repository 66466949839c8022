"""A problem's prompt (engine/prompt.py) with SmolLM2's real tokenizer: one whose characters alone
prove it longer than the context is refused untokenized (a 50 MB problem took 46 s and 3.9 GB to be
tokenized before it was refused), and the bound that proves it holds for the real vocabulary; and a
problem with nothing visible in it is refused, whatever invisible characters it is made of (the rule
every way into the engine shares: solve, the chat, bench's check of its problems)."""

from __future__ import annotations

import time

import pytest
from fakes import FakeGenerator

from edgereason.backends.llama_vocab import load_vocab
from edgereason.backends.prompter import ModelPrompter
from edgereason.engine.prompt import MAX_TOKEN_BYTES, prompt_ids
from edgereason.errors import ConfigError


class CountedTokens(ModelPrompter):
    """The real prompter, counting the characters it was given to tokenize."""

    tokenized = 0

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        self.tokenized += len(text)
        return super().tokenize(text, special)


@pytest.fixture(scope="module")
def vocab(smollm2_path):
    return load_vocab(str(smollm2_path))


def test_no_token_is_longer_than_the_bound(vocab):
    """The bound is a proof only if no token of the problem's text holds more bytes than it."""
    longest = max(len(vocab.token_piece(t)) for t in range(vocab.n_vocab))
    assert 0 < longest <= MAX_TOKEN_BYTES // 2, longest


def test_a_50_mb_problem_is_refused_before_it_is_tokenized(vocab):
    prompter = CountedTokens(vocab)
    problem = "What is 1+1? " * (50_000_000 // 13)
    started = time.process_time()
    with pytest.raises(ConfigError) as refused:
        prompt_ids(prompter, problem)
    assert time.process_time() - started < 5 and prompter.tokenized == 0
    assert str(refused.value) == (
        f"the problem is {len(problem.strip()):,} characters, so at least 195,313 tokens, but the "
        f"generator {prompter.name} was trained on at most 8192 tokens of context; shorten the "
        "problem or use a model with a longer context"
    )


def test_one_the_bound_cannot_refuse_is_counted_in_tokens(vocab):
    """Just under MAX_TOKEN_BYTES characters a token of context: tokenized, and refused by its
    count."""
    prompter = CountedTokens(vocab)
    size = MAX_TOKEN_BYTES * vocab.n_ctx_train
    problem = ("What is 1+1? " * (size // 13 + 1))[:size]
    with pytest.raises(ConfigError, match=r"the problem is \d+ tokens but the generator"):
        prompt_ids(prompter, problem)
    assert prompter.tokenized > len(problem)  # the chat template's text too


def test_a_problem_that_fits_is_its_prompt(vocab):
    prompter = CountedTokens(vocab)
    ids = prompt_ids(prompter, "What is 2+3?")
    assert 0 < len(ids) < 200 and "What is 2+3?" in vocab.detokenize(ids)


EMPTY = "the problem is empty; pass the problem text (or - to read it from stdin)"
INVISIBLE = (
    "the problem has no visible characters (only zero-width or other invisible ones); pass the "
    "problem text (or - to read it from stdin)"
)


@pytest.mark.parametrize(
    "problem, why",
    [
        ("", EMPTY),
        (" \n\t", EMPTY),
        ("\u200b", INVISIBLE),  # the zero-width space
        ("\u200b \u2060\ufeff\u00ad\u200e", INVISIBLE),  # word joiner, BOM, soft hyphen, LRM
        ("\x07\u200b", INVISIBLE),  # a control character shows nothing either
    ],
)
def test_a_problem_with_nothing_visible_is_refused(problem, why) -> None:
    with pytest.raises(ConfigError) as refused:
        prompt_ids(FakeGenerator(), problem)
    assert str(refused.value) == why


def test_invisible_characters_beside_visible_text_are_kept() -> None:
    assert prompt_ids(FakeGenerator(), "What is 2+3?\u200b")
