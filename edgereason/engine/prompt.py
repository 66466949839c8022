"""A problem's prompt for the generator, checked before it is queued: the engine's `submit` and a
bench's check of its problems before the first run use the same rule.

A problem too long for the context is refused by its length in characters alone where that proves
it, before it is tokenized: each token of the problem's text (a literal span, never a control token)
holds at most MAX_TOKEN_BYTES bytes, and a character is at least one byte, so a problem of more
than MAX_TOKEN_BYTES x context characters cannot fit. A 50 MB problem took 46 s and 3.9 GB to be
tokenized before it was refused."""

from __future__ import annotations

from edgereason.errors import ConfigError
from edgereason.prompts import literal, solve_messages, unmark
from edgereason.protocols import Generator
from edgereason.util.text import blank_problem

# twice the longest token of the registry's models (Qwen2.5's: 128 spaces; SmolLM2's: 81 bytes)
MAX_TOKEN_BYTES = 256


def prompt_ids(generator: Generator, question: str, prefix: str = "") -> list[int]:
    """The generator's prompt for `question` (continued by `prefix`); ConfigError for an empty
    problem or one the generator cannot hold. A bench checks its problems with it before the first
    run, not mid-run."""
    if why := blank_problem(question):
        raise ConfigError(f"{why}; pass the problem text (or - to read it from stdin)")
    _check_length(generator, question)
    # the prefix is model-written text: read as text, like the problem (prompts.literal)
    prompt = generator.tokenize(
        generator.apply_chat_template(solve_messages(question))
        + (literal(prefix) if prefix else "")
    )
    trained = generator.context_length
    if len(prompt) + 16 > trained:
        raise ConfigError(
            f"the problem is {len(prompt)} tokens but the generator {generator.name} was "
            f"trained on at most {trained} tokens of context; shorten the problem or use a model "
            "with a longer context"
        )
    room = generator.kv_capacity_tokens
    if len(prompt) + 16 > room:
        raise ConfigError(
            f"the problem is {len(prompt)} tokens but the generator's KV memory holds {room}; "
            "shorten the problem or raise --kv-budget (or --kv-tokens)"
        )
    return prompt


def _check_length(generator: Generator, question: str) -> None:
    """ConfigError for a problem whose characters alone prove it longer than the context."""
    chars = len(unmark(question.strip()))  # the text solve_messages puts in the prompt
    trained = generator.context_length
    if chars > MAX_TOKEN_BYTES * trained:
        raise ConfigError(
            f"the problem is {chars:,} characters, so at least {-(-chars // MAX_TOKEN_BYTES):,} "
            f"tokens, but the generator {generator.name} was trained on at most {trained} tokens "
            "of context; shorten the problem or use a model with a longer context"
        )
