"""A problem's prompt for the generator, checked before it is queued: the engine's `submit` and a
bench's check of its problems before the first run use the same rule."""

from __future__ import annotations

from edgereason.errors import ConfigError
from edgereason.prompts import literal, solve_messages
from edgereason.protocols import Generator
from edgereason.util.text import blank_problem


def prompt_ids(generator: Generator, question: str, prefix: str = "") -> list[int]:
    """The generator's prompt for `question` (continued by `prefix`); ConfigError for an empty
    problem or one the generator cannot hold. A bench checks its problems with it before the first
    run, not mid-run."""
    if why := blank_problem(question):
        raise ConfigError(f"{why}; pass the problem text (or - to read it from stdin)")
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
