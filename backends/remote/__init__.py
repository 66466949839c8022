"""Remote backend: the generator, the PRM or both served by an OpenAI-compatible server (llama.cpp's server,
vLLM, SGLang) instead of running in this process.

Locally each remote role needs only its model's tokenizer and chat template, read from the GGUF named by `--model`
/ `--prm` without its weights (`load_vocab`): the engine counts tokens and ends steps on them exactly as it does
for a local model, and the PRM prompts are rendered here. That GGUF must be the served model's (or share its
tokenizer and template).
"""

from __future__ import annotations

from pathlib import Path

from edgereason.backends.llamacpp.model import load_vocab
from edgereason.backends.prm_format import prm_format
from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.backends.remote.generator import RemoteGenerator
from edgereason.backends.remote.identity import check_served_models
from edgereason.backends.remote.settings import DEFAULT_STEP_TOKENS, Endpoint, RemoteSettings
from edgereason.backends.remote.verifier import TOP_LOGPROBS, RemoteVerifier


def open_generator(
    vocab_path: Path, endpoint: Endpoint, context_tokens: int, step_tokens: int = DEFAULT_STEP_TOKENS
) -> RemoteGenerator:
    client = CompletionClient(endpoint)
    try:
        client.model  # noqa: B018 - fails here, with one line, when the server is down or lists no model
    except RemoteError:
        client.close()
        raise
    return RemoteGenerator(client, load_vocab(str(vocab_path)), context_tokens, step_tokens)


def open_verifier(
    vocab_path: Path, prm_format_name: str, endpoint: Endpoint, top_logprobs: int = TOP_LOGPROBS
) -> RemoteVerifier:
    fmt = prm_format(prm_format_name)
    client = CompletionClient(endpoint)
    try:
        verifier = RemoteVerifier(client, load_vocab(str(vocab_path)), fmt, top_logprobs)
        client.model  # noqa: B018 - as above
    except Exception:
        client.close()
        raise
    return verifier


__all__ = [
    "CompletionClient",
    "Endpoint",
    "RemoteError",
    "RemoteGenerator",
    "RemoteSettings",
    "RemoteVerifier",
    "check_served_models",
    "open_generator",
    "open_verifier",
]
