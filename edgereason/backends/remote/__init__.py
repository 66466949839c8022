"""Remote backend: the generator, the PRM or both served by an OpenAI-compatible server (llama.cpp's
server, vLLM, SGLang) instead of running in this process.

Locally each remote role needs only its model's tokenizer and chat template, read from the GGUF
named by `--model` / `--prm` without its weights (`load_vocab`): the engine counts tokens and ends
steps on them exactly as it does for a local model, and the PRM prompts are rendered here. That GGUF
must be the served model's (or share its tokenizer and template).

A role may be served by several servers of one model (pool.py): requests spread over them, and one
that stops answering hands its requests to the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from edgereason.backends.llama_vocab import load_vocab
from edgereason.backends.prm_format import prm_format
from edgereason.backends.remote.checks import check_servers
from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.backends.remote.generator import RemoteGenerator
from edgereason.backends.remote.pool import Outages, ServerPool
from edgereason.backends.remote.verifier import TOP_LOGPROBS, RemoteVerifier
from edgereason.backends.remote_settings import DEFAULT_STEP_TOKENS, Endpoint, RemoteSettings

Endpoints = Endpoint | Sequence[Endpoint]
T = TypeVar("T")


def open_generator(
    vocab_path: Path,
    endpoints: Endpoints,
    context_tokens: int,
    step_tokens: int = DEFAULT_STEP_TOKENS,
    outages: Outages | None = None,
) -> RemoteGenerator:
    """outages: shared with the PRM's pool, so that a server both use is reported once when it stops
    answering."""
    return _opened(
        ServerPool(_listed(endpoints), outages),
        lambda pool: RemoteGenerator(
            pool, load_vocab(str(vocab_path)), context_tokens, step_tokens
        ),
    )


def open_verifier(
    vocab_path: Path,
    prm_format_name: str,
    endpoints: Endpoints,
    top_logprobs: int = TOP_LOGPROBS,
    outages: Outages | None = None,
) -> RemoteVerifier:
    fmt = prm_format(prm_format_name)
    return _opened(
        ServerPool(_listed(endpoints), outages),
        lambda pool: RemoteVerifier(pool, load_vocab(str(vocab_path)), fmt, top_logprobs),
    )


def _opened(pool: ServerPool, make: Callable[[ServerPool], T]) -> T:
    """`make(pool)`, settings checked, then the servers asked for their models: one line where one
    is down."""
    try:
        role = make(pool)
        pool.ask_models()
    except BaseException:
        pool.close()
        raise
    return role


def _listed(endpoints: Endpoints) -> tuple[Endpoint, ...]:
    return (endpoints,) if isinstance(endpoints, Endpoint) else tuple(endpoints)


__all__ = [
    "CompletionClient",
    "Endpoint",
    "Outages",
    "RemoteError",
    "RemoteGenerator",
    "RemoteSettings",
    "RemoteVerifier",
    "ServerPool",
    "check_servers",
    "open_generator",
    "open_verifier",
]
