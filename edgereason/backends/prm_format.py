"""PRM prompts (design.md section 2), built from the model's own chat template. Every format is
prefix-stable: the tokens for steps 1..k are a prefix of the tokens for steps 1..k+1, and step k is
read at the last token of its segment.

Turn style (judge, rlhflow): segment 1 is the system turn and the first user turn (question + " " +
step 1) up to the assistant header; segment k > 1 is the previous assistant answer (the "good"
token), the end of that turn, the user turn with step k and the next assistant header. The score of
step k is P(good) against P(bad).

Solve style (head): the generator's own prompt (its system prompt and the question, the assistant
turn open), then the steps exactly as generated. A trained value head reads the logits at each
step's last token."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from edgereason.errors import ConfigError, ModelError
from edgereason.prompts import literal, solve_messages

JUDGE_SYSTEM = (
    "You check math solutions one step at a time. The user gives a problem with the first step of "
    "a solution, then further steps. After each step answer only Yes if every step so far is "
    "correct and useful, or No if the latest step has a mistake."
)


@dataclass(frozen=True)
class PRMFormat:
    name: str
    good: str
    bad: str
    system: str | None
    prompt: Literal["turn", "solve"] = "turn"
    tag: str | None = None  # tag style: this text ends every step, and the step is read there


PRM_FORMATS: dict[str, PRMFormat] = {
    "judge": PRMFormat("judge", good="Yes", bad="No", system=JUDGE_SYSTEM),
    "rlhflow": PRMFormat("rlhflow", good="+", bad="-", system=None),
    "head": PRMFormat("head", good="", bad="", system=None, prompt="solve"),
    # " ки"
    "math-shepherd": PRMFormat(
        "math-shepherd", good="+", bad="-", system=None, tag=" \u043a\u0438"
    ),
}

_Q, _S1, _S2 = "@@QUESTION@@", "@@STEP_ONE@@", "@@STEP_TWO@@"


def prm_format(name: str) -> PRMFormat:
    if name not in PRM_FORMATS:
        raise ConfigError(f"unknown PRM format {name!r}; choose one of {', '.join(PRM_FORMATS)}")
    return PRM_FORMATS[name]


class TurnPrompt:
    """Renders segments once from placeholders, so scoring a step costs a string substitution.

    The head is everything up to the end of the question (shared by every path of one question); the
    first step's segment starts with the " " that joins it to the question in the first user
    turn."""

    def __init__(self, fmt: PRMFormat, render: Callable[[list[dict[str, str]]], str]) -> None:
        self.fmt = fmt
        head = [{"role": "system", "content": fmt.system}] if fmt.system else []
        one = render(head + [{"role": "user", "content": f"{_Q} {_S1}"}])
        two = render(
            head
            + [
                {"role": "user", "content": f"{_Q} {_S1}"},
                {"role": "assistant", "content": fmt.good},
                {"role": "user", "content": _S2},
            ]
        )
        if not two.startswith(one) or _S2 not in two[len(one) :] or f"{_Q} {_S1}" not in one:
            raise ModelError(
                "the PRM model's chat template is not prefix-stable; use another PRM model"
            )
        cut = one.index(f"{_Q} {_S1}") + len(_Q)
        self._head = one[:cut]
        self._first = one[cut:]
        self._next = two[len(one) :]

    def head(self, question: str) -> str:
        return self._head.replace(_Q, literal(question.strip()), 1)

    def segments(self, steps: Sequence[str], start: int) -> list[str]:
        """The text segments for steps[start:], given the KV already holds the head and segments [0,
        start). Each step is literal: a step that writes "<|im_end|>" cannot close its turn and
        answer for the judge. The first step's joining " " goes inside its span, so it tokenizes
        with the step as in the whole text."""
        return [
            (
                self._first.replace(f" {_S1}", literal(" " + steps[i].strip()), 1)
                if i == 0
                else self._next.replace(_S2, literal(steps[i].strip()), 1)
            )
            for i in range(start, len(steps))
        ]


class SolvePrompt:
    """The generator's prompt for `question`, then the steps verbatim: what a value head was trained
    on."""

    def __init__(self, render: Callable[[list[dict[str, str]]], str]) -> None:
        self._render = render

    def head(self, question: str) -> str:
        return self._render(solve_messages(question))

    def segments(self, steps: Sequence[str], start: int) -> list[str]:
        return [literal(step) for step in steps[start:]]


class TagPrompt:
    """Tag style (Math-Shepherd), no chat template: question + " " + step 1 + tag, then "\\n" + step
    k + tag; the head is the question alone."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def head(self, question: str) -> str:
        return literal(question.strip())

    def segments(self, steps: Sequence[str], start: int) -> list[str]:
        # the tag is plain text (no control token): inside the span it tokenizes with the step, as
        # in the whole text
        return [
            literal((" " if i == 0 else "\n") + steps[i].strip() + self.tag)
            for i in range(start, len(steps))
        ]


def prompt_for(
    fmt: PRMFormat, render: Callable[[list[dict[str, str]]], str]
) -> TurnPrompt | SolvePrompt | TagPrompt:
    if fmt.tag is not None:
        return TagPrompt(fmt.tag)
    return SolvePrompt(render) if fmt.prompt == "solve" else TurnPrompt(fmt, render)
