"""What the remote backend is told: the servers (endpoints) and which roles they serve. Plain
validated data that the CLI builds and the set-up hands on (interface.Placement.remote), outside the
remote backend's package, so neither imports the backend or its HTTP client."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from edgereason.errors import ConfigError
from edgereason.util.secrets import hide_credentials

BACKOFF_S = 0.5  # first retry after this, doubling
# the longest a check at opening waits for an answer (the model list, tokenize, one token)
PROBE_TIMEOUT_S = 10.0
DEFAULT_STEP_TOKENS = 512
# the most one answer's body may be, inflated: a PRM score's answer is ~1 KB, a generator step's of
# 512 tokens ~3 KB a completion; 512 tokens with 20 logprobs each, ~310 KB from llama-cpp-python
DEFAULT_MAX_ANSWER_MIB = 4.0
MiB = 1 << 20


# a host name: no space, control character or character a URL must escape (a non-ASCII name is
# IDNA, and taken)
_HOST_NAME = re.compile(r"[^\s\x00-\x1f\x7f-\x9f/\\<>\"{}|^`\[\]]+")


def check_url(url: str, flag: str = "--base-url") -> None:
    """ConfigError (exit 2) for a URL no request can be sent to: its scheme, host and port are
    checked where the settings are read (a bad port or host was a traceback at the first
    request)."""
    if problem := _url_problem(url):
        example = "an http(s) URL such as http://127.0.0.1:8080"
        raise ConfigError(f"{flag} must be {example}; {hide_credentials(url)!r} {problem}")


def _url_problem(url: str) -> str | None:
    """What makes `url` unusable, in a few words; None where it is fine."""
    bad_ipv6 = "has a host in brackets that is no IPv6 address"
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed "[", or brackets around something else
        return bad_ipv6
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "is not an http(s) URL"
    address, host = parts.netloc.rpartition("@")[2], parts.hostname
    try:
        port = parts.port
    except ValueError:
        port = 0
    if not host:
        return "names no host"
    if address.endswith(":"):
        return "has no port after its colon"
    if port == 0:
        return "has a port that is not a number from 1 to 65535"
    if address.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return bad_ipv6
    elif not _HOST_NAME.fullmatch(host):
        return f"has a host name with characters no host name has ({host!r})"
    return _http_client_problem(url)


def _http_client_problem(url: str) -> str | None:
    """What the HTTP client itself refuses in a URL (an IDNA name it cannot encode, an IPv4 address
    out of range); imported here only, so that the CLI reads settings without it where no URL is
    given."""
    import httpx

    try:
        httpx.URL(url)
    except httpx.InvalidURL as e:
        return f"is refused by the HTTP client ({hide_credentials(str(e))})"
    return None


@dataclass(frozen=True, repr=False)
class Endpoint:
    """One OpenAI-compatible server and how to talk to it. Shown (messages, repr, result files) by
    `root`, whose credentials are ***; `address` keeps them, for the HTTP client alone."""

    base_url: str  # e.g. http://127.0.0.1:8080 (a trailing /v1 is accepted)
    model: str | None = None  # the served model name; None: the first of the server's /v1/models
    # environment variable holding the API key (sent as a Bearer token)
    api_key_env: str | None = None
    timeout_s: float = 120.0  # one HTTP request, from sending to the last byte of the answer
    connect_timeout_s: float = 5.0
    retries: int = 3
    concurrency: int = 16  # requests in flight at once
    max_answer_mib: float = DEFAULT_MAX_ANSWER_MIB  # one answer's body, inflated

    def __post_init__(self) -> None:
        check_url(self.base_url)
        # NaN compares false
        if not all(0 < t < math.inf for t in (self.timeout_s, self.connect_timeout_s)):
            raise ConfigError(
                f"--remote-timeout must be a positive number of seconds, got {self.timeout_s}"
            )
        if not 0 < self.max_answer_mib < math.inf:
            raise ConfigError(
                f"--remote-max-answer must be a positive number of MiB, got {self.max_answer_mib}"
            )
        if self.retries < 0:
            raise ConfigError(f"--remote-retries must be >= 0, got {self.retries}")
        if self.concurrency < 1:
            raise ConfigError(f"--remote-concurrency must be >= 1, got {self.concurrency}")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise ConfigError(
                f"--api-key-env {self.api_key_env}: that environment variable is not set"
            )

    def __repr__(self) -> str:
        return f"Endpoint({self.root!r}, model={self.model!r})"

    @property
    def root(self) -> str:
        """The URL the /v1 paths hang from, as it is shown: credentials as ***."""
        return hide_credentials(self.address)

    @property
    def address(self) -> str:
        """The URL the /v1 paths hang from, credentials included: for the HTTP client alone."""
        base = self.base_url.rstrip("/")
        return base[:-3] if base.endswith("/v1") else base

    @property
    def max_answer_bytes(self) -> int:
        return max(1, int(self.max_answer_mib * MiB))

    @property
    def deadline_s(self) -> float:
        """Longest a batch may take: every retry of a request timing out, with its backoff."""
        return (self.retries + 1) * (self.timeout_s + self.connect_timeout_s) + BACKOFF_S * 2 ** (
            self.retries + 1
        )

    @property
    def probe_deadline_s(self) -> float:
        """Longest a check at opening may take: connection errors retried with their backoff, one
        timeout."""
        waits = (self.retries + 1) * self.connect_timeout_s + min(self.timeout_s, PROBE_TIMEOUT_S)
        return min(self.deadline_s, waits + BACKOFF_S * 2 ** (self.retries + 1))


@dataclass(frozen=True)
class RemoteSettings:
    """Which roles are served and where, each by one or more servers of its model. `generator`
    empty: the generator runs here. `prm` empty: the PRM is served by the generator's servers,
    unless `prm_here` (a value head, which a server cannot run: it reads thousands of logits a step)
    runs it in this process."""

    generator: tuple[Endpoint, ...] = ()
    prm: tuple[Endpoint, ...] = ()
    step_tokens: int = DEFAULT_STEP_TOKENS  # max_tokens of one generator request
    # the servers' context per sequence; None: the model's trained context
    context_tokens: int | None = None
    prm_here: bool = False

    def __post_init__(self) -> None:
        if not self.generator and not self.prm:
            raise ConfigError(
                "the remote backend needs --base-url (generator and PRM) or --prm-base-url"
            )
        if self.prm_here and self.prm:
            raise ConfigError(
                "a value head runs here, not on a server: drop --prm-base-url or --prm-format head"
            )
        for endpoints, flag in ((self.generator, "--base-url"), (self.prm, "--prm-base-url")):
            roots = [e.root for e in endpoints]
            if twice := sorted({r for r in roots if roots.count(r) > 1}):
                raise ConfigError(
                    f"{flag} names the server at {twice[0]} twice; list each server once"
                )
        if self.step_tokens < 1:
            raise ConfigError(f"--remote-step-tokens must be >= 1, got {self.step_tokens}")
        if self.context_tokens is not None and self.context_tokens < 64:
            raise ConfigError(f"--remote-context must be >= 64 tokens, got {self.context_tokens}")

    @property
    def prm_endpoints(self) -> tuple[Endpoint, ...]:
        """The PRM's servers; none where it runs here."""
        return self.prm or (() if self.prm_here else self.generator)

    @property
    def prm_flag(self) -> str:
        """The flag that lists the PRM's servers."""
        same = [e.root for e in self.prm_endpoints] == [e.root for e in self.generator]
        return "--base-url" if same else "--prm-base-url"
