"""The shapes of a server's answers that the remote backend reads, checked where they come in
(client.py).

An answer is untrusted: valid JSON of another shape (a list where an object belongs, choices that
are not objects, a logprob that is a string or not finite) ended in AttributeError and TypeError
tracebacks deep in the generator and the verifier. Here each answer is read into typed values once,
and anything else raises `Wrong`, a few words on what was wrong, which the client turns into one
line naming the server. Fields the backend does not read are ignored, so servers that add their own
stay welcome. A completion holds no more than its request asked for (`Asked`): a million choices
where two were asked took 114 s and 3.8 GB to read and tokenize, and each choice's text becomes
tokens held for the search, so its length is bounded by the tokens asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# the most characters one token's text may have: SmolLM2's longest piece has 81 (a run of spaces)
MAX_TOKEN_CHARS = 256


class Wrong(Exception):
    """What was wrong with an answer, in a few words ("choices[0] is a string, not an object")."""


class TooMuch(Wrong):
    """An answer of more than its request asked for ("3 completions where 2 were asked")."""


@dataclass(frozen=True)
class Asked:
    """What a completion request asked for, which bounds its answer."""

    n: int = 1  # completions
    max_tokens: int | None = None  # of each; None: the server's own limit

    @classmethod
    def of(cls, body: dict[str, Any]) -> Asked:
        n, max_tokens = body.get("n", 1), body.get("max_tokens")
        return cls(
            n if type(n) is int and n > 0 else 1,
            max_tokens if type(max_tokens) is int and max_tokens > 0 else None,
        )


@dataclass(frozen=True)
class Logprobs:
    """OpenAI's completion logprobs, position by position (the legacy completions format vLLM and
    llama.cpp give)."""

    tokens: tuple[str, ...]  # the sampled token at each position
    token_logprobs: tuple[float | None, ...]  # its log-probability
    # each position's most likely tokens and their log-probabilities
    top: tuple[dict[str, float], ...]


@dataclass(frozen=True)
class Choice:
    text: str
    finish_reason: str | None
    # whether the server says what stopped it (vLLM's stop_reason, SGLang's matched_stop)
    said_stop: bool
    # the stop string it matched; None where it says it stopped at something else (end of text)
    stop: str | None
    logprobs: Logprobs | None


@dataclass(frozen=True)
class Completion:
    choices: tuple[Choice, ...]
    prompt_tokens: int  # as the server counts them (`usage`); 0 where it does not say
    completion_tokens: int


def read_completion(data: Any, asked: Asked = Asked()) -> Completion:
    """A /v1/completions answer: {"choices": [...], "usage": {...}}, of at most what was asked."""
    answer = _object(data, "the answer")
    choices = _list(answer.get("choices"), "choices")
    if len(choices) > asked.n:  # before any is read
        raise TooMuch(f"{len(choices)} completions where {asked.n} were asked")
    usage = _object(answer.get("usage", {}) if answer.get("usage") is not None else {}, "usage")
    return Completion(
        tuple(_choice(c, f"choices[{i}]", asked.max_tokens) for i, c in enumerate(choices)),
        _count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        _count(usage.get("completion_tokens"), "usage.completion_tokens"),
    )


def read_models(data: Any) -> list[str]:
    """The model names a /v1/models answer lists ({"data": [{"id": ...}, ...]}), in its order."""
    ids = []
    for i, entry in enumerate(_list(_object(data, "the answer").get("data"), "data")):
        name = _object(entry, f"data[{i}]").get("id")
        if not isinstance(name, str) or not name:
            raise Wrong(f"data[{i}].id is {_kind(name)}, not a model name")
        ids.append(name)
    return ids


def read_tokens(data: Any) -> list[int] | None:
    """The token ids of a tokenize answer ({"tokens": [ids]}), or None for any other answer: another
    endpoint's, or ids with their pieces (objects), are no reading to judge a tokenizer by."""
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(type(t) is int for t in tokens):
        return None
    return tokens


def _choice(data: Any, where: str, max_tokens: int | None) -> Choice:
    choice = _object(data, where)
    said = "stop_reason" in choice or "matched_stop" in choice
    stop = choice.get("stop_reason", choice.get("matched_stop"))
    logprobs = choice.get("logprobs")
    text = _text(choice.get("text"), f"{where}.text")
    if max_tokens is not None and len(text) > max_tokens * MAX_TOKEN_CHARS:
        raise TooMuch(
            f"{where}.text of {len(text)} characters where {max_tokens} tokens were asked"
        )
    return Choice(
        text,
        _optional_text(choice.get("finish_reason"), f"{where}.finish_reason"),
        said,
        stop if isinstance(stop, str) else None,  # a token id, or null: stopped at the end of text
        None if logprobs is None else _logprobs(logprobs, f"{where}.logprobs", max_tokens),
    )


def _logprobs(data: Any, where: str, max_tokens: int | None) -> Logprobs:
    logprobs = _object(data, where)
    tokens = _positions(logprobs.get("tokens"), f"{where}.tokens", max_tokens)
    values = _positions(logprobs.get("token_logprobs"), f"{where}.token_logprobs", max_tokens)
    top = _positions(logprobs.get("top_logprobs"), f"{where}.top_logprobs", max_tokens)
    return Logprobs(
        tuple(_text(t, f"{where}.tokens[{i}]") for i, t in enumerate(tokens)),
        tuple(
            None if v is None else _logprob(v, f"{where}.token_logprobs[{i}]")
            for i, v in enumerate(values)
        ),
        tuple(_top(t, f"{where}.top_logprobs[{i}]") for i, t in enumerate(top)),
    )


def _positions(value: Any, where: str, max_tokens: int | None) -> list[Any]:
    """A list of one entry a token, of at most the tokens asked."""
    entries = _list(value, where)
    if max_tokens is not None and len(entries) > max_tokens:
        raise TooMuch(f"{where} of {len(entries)} tokens where {max_tokens} were asked")
    return entries


def _top(data: Any, where: str) -> dict[str, float]:
    """One position's top logprobs: {token: logprob}, or as some servers give them, a list of
    {"token": ..., "logprob": ...}."""
    if data is None:
        return {}
    if isinstance(data, list):
        pairs = [_object(entry, f"{where}[{i}]") for i, entry in enumerate(data)]
        data = {_text(p.get("token"), f"{where}.token"): p.get("logprob") for p in pairs}
    items = _object(data, where).items()
    return {token: _logprob(value, f"{where}[{j}]") for j, (token, value) in enumerate(items)}


def _logprob(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Wrong(f"{where} is {_kind(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        number = math.inf
    if not math.isfinite(number):
        raise Wrong(f"{where} is not a finite number")
    return number


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise Wrong(f"{where} is {_kind(value)}, not a count")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Wrong(f"{where} is {_kind(value)}, not text")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Wrong(f"{where} is {_kind(value)}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Wrong(f"{where} is {_kind(value)}, not a list")
    return value


def _kind(value: Any) -> str:
    """A JSON value's kind, as a message names it (never the value: it could be anything)."""
    if value is None:
        return "null"
    if value == "":
        return "an empty string"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a negative number" if value < 0 else "a number"
    return {str: "a string", list: "a list"}.get(type(value), "an object")
