"""engine/prompt.prompt_ids: the rule every way into the engine shares (solve, the chat, bench's
check of its problems): a problem with nothing visible in it is refused, whatever invisible
characters it is made of."""

from __future__ import annotations

import pytest
from fakes import FakeGenerator

from edgereason.engine.prompt import prompt_ids
from edgereason.errors import ConfigError

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
