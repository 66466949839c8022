"""PRM formats on torch: how (question, steps) become tokens, and which token of each step is read.

Rules every format keeps (the llama.cpp verifier's, so per-path KV reuse works the same way):
- A path's tokens are the head's tokens (the question; shared by every path of it) followed by one
  segment per step, each tokenized on its own. So the tokens for steps 1..k are a prefix of the
  tokens for steps 1..k+1.
- Step k is read at the last token of its segment.
- The head gets the tokenizer's own leading special tokens (a BOS where it adds one), once: never
  when the text already starts with them (a chat template that writes its BOS).

Per format (each the checkpoint's own convention):
- qwen-prm (Qwen2.5-Math-PRM): system QWEN_PRM_SYSTEM, user = question, assistant = the steps, each
  followed by `<extra_0>`; read at each `<extra_0>`.
- skywork (Skywork-o1-Open-PRM): BOS text + question + "\\n", then each step's tokens followed by
  the "\\n" token (appended as a token, as Skywork's `prepare_input` does, so it never merges into
  the step's last token).
- math-shepherd: question + " " + step 1 + " ки", then "\\n" + step k + " ки"; read at the tag.
- rlhflow, judge: TurnPrompt (backends/prm_format.py) on the model's chat template.
- head: the generator's solve prompt, steps verbatim (SolvePrompt).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from edgereason.backends.prm_format import PRM_FORMATS, prompt_for
from edgereason.errors import ModelError
from edgereason.prompts import literal, literal_spans

QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN_PRM_SEP = "<extra_0>"
SKYWORK_STEP = "\n"
TORCH_FORMATS = ("qwen-prm", "skywork", "math-shepherd", "rlhflow", "judge", "head")

Render = Callable[[list[dict[str, str]]], str]


class TextPrompt(Protocol):
    def head(self, question: str) -> str: ...
    def segments(self, steps: Sequence[str], start: int) -> list[str]: ...


class PathTokens:
    """Token ids of a path's head and of its step segments, from a text prompt and a Hugging Face
    tokenizer."""

    def __init__(self, prompt: TextPrompt, tokenizer: Any, step_end: int | None = None) -> None:
        """step_end: a token id appended to every segment (Skywork's step token)."""
        self.prompt = prompt
        self.tokenizer = tokenizer
        self.step_end = step_end
        with_special = tokenizer.encode("a")
        plain = tokenizer.encode("a", add_special_tokens=False)
        cut = len(with_special) - len(plain)
        self._lead = with_special[:cut] if cut > 0 and with_special[cut:] == plain else []

    def encode(self, text: str) -> list[int]:
        """A literal span (the question, a step: edgereason.prompts.literal) is tokenized with no
        special tokens."""
        return [
            i
            for piece, is_literal in literal_spans(text)
            for i in self.tokenizer.encode(
                piece, add_special_tokens=False, split_special_tokens=is_literal
            )
        ]

    def head(self, question: str) -> list[int]:
        ids = self.encode(self.prompt.head(question))
        return ids if ids[: len(self._lead)] == self._lead else self._lead + ids

    def segments(self, steps: Sequence[str], start: int) -> list[list[int]]:
        extra = [] if self.step_end is None else [self.step_end]
        return [self.encode(text) + extra for text in self.prompt.segments(steps, start)]


class QwenPRMPrompt:
    """Qwen2.5-Math-PRM's conversation; checked against the model's chat template when built."""

    def __init__(self, render: Render) -> None:
        messages = [
            {"role": "system", "content": QWEN_PRM_SYSTEM},
            {"role": "user", "content": "@@Q@@"},
        ]
        opened = render(messages)
        whole = render(messages + [{"role": "assistant", "content": f"@@S@@{QWEN_PRM_SEP}"}])
        if not whole.startswith(opened) or not whole[len(opened) :].startswith(
            f"@@S@@{QWEN_PRM_SEP}"
        ):
            raise ModelError(
                "the qwen-prm format needs a chat template whose assistant turn starts right after "
                "its header (Qwen's ChatML); this checkpoint's template differs"
            )
        self._head = opened

    def head(self, question: str) -> str:
        return self._head.replace("@@Q@@", literal(question.strip()), 1)

    def segments(self, steps: Sequence[str], start: int) -> list[str]:
        return [literal(steps[i].strip()) + QWEN_PRM_SEP for i in range(start, len(steps))]


class SkyworkPrompt:
    def __init__(self, bos_text: str) -> None:
        self._bos = bos_text

    def head(self, question: str) -> str:
        # the "\n" inside the literal span: tokenized with the question, as Skywork's own
        # prepare_input does
        return f"{self._bos}{literal(question.strip() + SKYWORK_STEP)}"

    def segments(self, steps: Sequence[str], start: int) -> list[str]:
        return [literal(steps[i].strip()) for i in range(start, len(steps))]


def path_tokens(fmt: str, tokenizer: Any) -> PathTokens:
    """The token builder for `fmt` on this tokenizer; ModelError when the tokenizer lacks what the
    format needs."""

    def render(messages: list[dict[str, str]]) -> str:
        if not getattr(tokenizer, "chat_template", None):
            raise ModelError(
                f"the {fmt} format needs a chat template and this checkpoint's tokenizer has none"
            )
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    if fmt == "qwen-prm":
        if QWEN_PRM_SEP not in tokenizer.get_vocab():
            raise ModelError(
                f"the tokenizer has no {QWEN_PRM_SEP} token: not a Qwen2.5-Math-PRM checkpoint "
                "(choose the --prm-format it was trained with)"
            )
        return PathTokens(
            QwenPRMPrompt(
                lambda m: tokenizer.apply_chat_template(
                    m, tokenize=False, add_generation_prompt=m[-1]["role"] != "assistant"
                )
            ),
            tokenizer,
        )
    if fmt == "skywork":
        step = tokenizer.encode(SKYWORK_STEP, add_special_tokens=False)[-1]
        return PathTokens(SkyworkPrompt(tokenizer.bos_token or ""), tokenizer, step_end=step)
    return PathTokens(prompt_for(PRM_FORMATS[fmt], render), tokenizer)
