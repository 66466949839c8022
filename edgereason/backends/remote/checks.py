"""The servers, checked once when a remote session opens, before any search and before a named model
is pulled. Each failure is one line naming the server and what to change:
- every server of a list answers (one that is down: start it, or leave it out of the list);
- the servers of one list serve one model: the same name in /v1/models (unless --served-model /
  --prm-served-model names it for them all, where servers name one model differently) and the same
  ids for identity.py's probe;
- that model is the one `--model` / `--prm` name (identity.py);
- each PRM server gives token logprobs on /v1/completions, which every score reads. A server's
  context is not asked (few servers tell it): a prompt longer than it is refused with HTTP 400, one
  line naming that server and how to give it a longer context (client.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from edgereason.backends.remote.client import CompletionClient
from edgereason.backends.remote.errors import RemoteError, Unreachable
from edgereason.backends.remote.identity import PROBE, OnDisk, judge_tokens, served_tokens
from edgereason.backends.remote_settings import Endpoint, RemoteSettings
from edgereason.errors import ConfigError

LOGPROBS_PROBE = {"prompt": "1 + 1 =", "max_tokens": 1, "logprobs": 2, "temperature": 0.0}


class Reading(NamedTuple):
    root: str
    served: str  # the model name requests carry: --served-model's, else the first the server lists
    named: bool  # whether the user named it (then servers may list the model under other names)
    tokens: list[int] | None  # PROBE as the server tokenizes it; None: it has no tokenize endpoint


class Role(NamedTuple):
    endpoints: tuple[Endpoint, ...]
    name: str  # the GGUF --model / --prm names
    flag: str  # that flag
    list_flag: str  # the flag listing the servers
    prm: bool


def check_servers(remote: RemoteSettings, model: str, prm: str, on_disk: OnDisk) -> None:
    """ConfigError or RemoteError, one line, for the first server of `remote` that fails a check
    (module docstring). on_disk: the set-up's look-up of a named model's GGUF that pulls nothing."""
    roles = (
        [Role(remote.generator, model, "--model", "--base-url", False)] if remote.generator else []
    )
    if remote.prm_endpoints:
        roles.append(Role(remote.prm_endpoints, prm, "--prm", remote.prm_flag, True))
    for role in roles:
        leave_out = f" (or leave it out of {role.list_flag})" if len(role.endpoints) > 1 else ""
        readings = [_read(endpoint, role, leave_out) for endpoint in role.endpoints]
        _check_one_model(readings, role)
        for r in readings:
            judge_tokens(r.root, r.served, r.tokens, role.name, role.flag, on_disk)


def _read(endpoint: Endpoint, role: Role, leave_out: str) -> Reading:
    """What the server serves, and for a PRM whether it gives logprobs. A server that is down: one
    line, with `leave_out` said where it is one of several."""
    client = CompletionClient(endpoint)
    try:
        try:
            served = client.model
        except Unreachable as err:
            raise RemoteError(f"{err}{leave_out}") from None
        if role.prm:
            _check_logprobs(client, leave_out)
        return Reading(
            endpoint.root, served, endpoint.model is not None, served_tokens(client, PROBE)
        )
    finally:
        client.close()


def _check_one_model(readings: Sequence[Reading], role: Role) -> None:
    """The servers of one list serve one model: the same listed name, and the same ids for the
    probe."""
    served_flag = "--prm-served-model" if role.list_flag == "--prm-base-url" else "--served-model"
    first = readings[0]
    for r in readings[1:]:
        if not r.named and r.served != first.served:
            raise ConfigError(
                f"the servers at {first.root} and {r.root} serve different models "
                f"({first.served!r} and {r.served!r}); list servers of one model in "
                f"{role.list_flag} (or pass {served_flag} NAME where they name one model "
                "differently)"
            )
    tokenizing = [r for r in readings if r.tokens is not None]
    for r in tokenizing[1:]:
        if r.tokens != tokenizing[0].tokens:
            raise ConfigError(
                f"the servers at {tokenizing[0].root} and {r.root} serve models of different "
                f"tokenizers ({tokenizing[0].served!r} and {r.served!r}); list servers of one "
                f"model in {role.list_flag}"
            )


def _check_logprobs(client: CompletionClient, leave_out: str) -> None:
    """A one-token completion with logprobs: RemoteError, one line, where the answer holds none."""
    try:
        answer = client.complete([LOGPROBS_PROBE], probe=True)[0]
    except Unreachable as err:  # a 5xx every time (llama-cpp-python without --logits_all)
        detail = err.detail
    else:
        logprobs = answer.choices[0].logprobs if answer.choices else None
        if logprobs is not None and logprobs.top and logprobs.top[0]:
            return
        detail = "its answer holds none"
    raise RemoteError(
        f"the PRM server at {client.endpoint.root} gives no token logprobs on /v1/completions "
        f"({detail}); start it with logprobs (llama-cpp-python: --logits_all true; vLLM: "
        f"--max-logprobs 20){leave_out}"
    )
