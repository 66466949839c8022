"""Remote backend: the generator, the PRM or both served by an OpenAI-compatible server (llama.cpp's server,
vLLM, SGLang) instead of running in this process.

Locally each remote role needs only its model's tokenizer and chat template, read from the GGUF named by `--model`
/ `--prm` without its weights (`load_vocab`): the engine counts tokens and ends steps on them exactly as it does
for a local model, and the PRM prompts are rendered here. That GGUF must be the served model's (or share its
tokenizer and template).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgereason.backends.llamacpp.runtime import load_vocab
from edgereason.backends.prm_format import prm_format
from edgereason.backends.remote.client import CompletionClient, Endpoint, RemoteError
from edgereason.backends.remote.generator import RemoteGenerator
from edgereason.backends.remote.verifier import RemoteVerifier
from edgereason.errors import ConfigError

DEFAULT_STEP_TOKENS = 512


@dataclass(frozen=True)
class RemoteSettings:
    """Which roles are served and where. `generator` None: the generator runs here; `prm` None: the PRM runs
    here (or, with a remote generator, on the generator's server)."""

    generator: Endpoint | None = None
    prm: Endpoint | None = None
    step_tokens: int = DEFAULT_STEP_TOKENS  # max_tokens of one generator request

    def __post_init__(self) -> None:
        if self.generator is None and self.prm is None:
            raise ConfigError("the remote backend needs --base-url (generator and PRM) or --prm-base-url")
        if self.step_tokens < 1:
            raise ConfigError(f"--remote-step-tokens must be >= 1, got {self.step_tokens}")

    @property
    def prm_endpoint(self) -> Endpoint | None:
        return self.prm or self.generator


def open_generator(vocab_path: Path, endpoint: Endpoint, context_tokens: int,
                   step_tokens: int = DEFAULT_STEP_TOKENS) -> RemoteGenerator:
    client = CompletionClient(endpoint)
    try:
        client.model  # noqa: B018 - fails here, with one line, when the server is down or lists no model
    except RemoteError:
        client.close()
        raise
    return RemoteGenerator(client, load_vocab(str(vocab_path)), context_tokens, step_tokens)


def open_verifier(vocab_path: Path, prm_format_name: str, endpoint: Endpoint) -> RemoteVerifier:
    fmt = prm_format(prm_format_name)
    client = CompletionClient(endpoint)
    try:
        verifier = RemoteVerifier(client, load_vocab(str(vocab_path)), fmt)
        client.model  # noqa: B018 - as above
    except Exception:
        client.close()
        raise
    return verifier


__all__ = ["CompletionClient", "Endpoint", "RemoteError", "RemoteGenerator", "RemoteSettings", "RemoteVerifier",
           "open_generator", "open_verifier"]
