"""Is the served model the one `--model` / `--prm` name? Checked once, when a remote session opens,
before any search and before a named model is pulled.

Locally a remote role reads only its GGUF's tokenizer and chat template; a server that serves
another model reads the token ids sent to it (`logit_bias`, the step ends) as other tokens, and the
search then fails far from the cause (a PRM server that seems to ignore `logit_bias`). So a probe
text is tokenized on the server and compared:
- with the named GGUF's tokenizer where that file is on disk (a path, or a registry model pulled
  before);
- with the ids of the probe's first and last tokens (the ChatML control tokens every registry model
  has) where the named model is a registry model not pulled yet: a mismatch is reported before its
  download, not after it. Servers tokenize at `/tokenize` (llama.cpp's server: `content`; vLLM:
  `prompt` and `model`) or `/extras/tokenize` (llama-cpp-python's: `input`). A server with neither
  is not checked: no answer is no evidence of a mismatch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import llama_cpp.llama_cpp as L

from edgereason.backends.llama_vocab import load_vocab
from edgereason.backends.remote.answers import read_tokens
from edgereason.backends.remote.client import CompletionClient
from edgereason.backends.remote_settings import Endpoint
from edgereason.errors import ConfigError

# control tokens, words and digits: text every implementation of one tokenizer (llama.cpp's, Hugging
# Face's) splits alike, so that the same model served from its Hugging Face weights is no false
# alarm
PROBE = "<|im_start|>user\nIs 12 * 7 - 5 = 79?<|im_end|>"

# (<|im_start|>, <|im_end|>) in each registry model's tokenizer, the probe's first and last ids
# (SmolLM2's and Qwen2.5's added tokens); the tests read them from every registry GGUF on disk
REGISTRY_PROBE_ENDS: dict[str, tuple[int, int]] = {
    "smollm2-135m": (1, 2),
    "qwen2.5-coder-0.5b": (151644, 151645),
    "qwen2.5-coder-1.5b": (151644, 151645),
}


# (name, role) -> the checked GGUF it names, None where not on disk yet
OnDisk = Callable[[str, str], Path | None]


def check_served_model(endpoint: Endpoint, name: str, flag: str, on_disk: OnDisk) -> None:
    """ConfigError, one line, where the server serves a model whose tokenizer is not the one `name`
    names (`flag` names it). on_disk: the set-up's look-up of a named model's GGUF that pulls
    nothing."""
    client = CompletionClient(endpoint)
    try:
        served = client.model  # also: a server that is down fails here, before a pull
        judge_tokens(endpoint.root, served, served_tokens(client, PROBE), name, flag, on_disk)
    finally:
        client.close()


def judge_tokens(
    root: str, served: str, ids: list[int] | None, name: str, flag: str, on_disk: OnDisk
) -> None:
    """The check of `check_served_model` on the probe's ids as the server at `root` tokenized them
    (None: it has no tokenize endpoint, so it is not judged)."""
    if ids is not None and not _tokenizes_as(
        ids, name, on_disk(name, "PRM" if flag == "--prm" else "model")
    ):
        raise ConfigError(
            f"the server at {root} serves {served!r}, whose tokenizer is not that of {name}; pass "
            f"{flag} naming that model's GGUF"
        )


def served_tokens(client: CompletionClient, text: str) -> list[int] | None:
    """`text` tokenized by the server (control-token text parsed), or None where it has no tokenize
    endpoint."""
    model = client.model
    # one body for llama.cpp's server and vLLM: each reads its own fields and ignores the other's
    answer = client.ask(
        "/tokenize",
        {
            "content": text,
            "add_special": False,
            "parse_special": True,
            "prompt": text,
            "model": model,
            "add_special_tokens": False,
        },
    )
    tokens = read_tokens(answer)
    if tokens is None:
        tokens = read_tokens(client.ask("/extras/tokenize", {"input": text, "model": model}))
    return tokens


def _tokenizes_as(ids: list[int], name: str, path: Path | None) -> bool:
    """Whether the server's ids of PROBE are those of the named model, read from its GGUF at `path`
    (None: a registry model not pulled yet, judged by REGISTRY_PROBE_ENDS); a leading BOS of its own
    is allowed (llama-cpp- python's endpoint adds one where the model does)."""
    if path is None:
        ends = REGISTRY_PROBE_ENDS.get(name)
        return ends is None or (ids[-1] == ends[1] and ends[0] in ids[:2])
    vocab = load_vocab(str(path))  # cached: the remote role reads this one again, so it stays open
    local = vocab.tokenize(PROBE, add_bos=False, special=True)
    return ids == local or ids == [L.llama_vocab_bos(vocab.vocab), *local]
