"""An OpenAI-compatible completions client: many requests in flight on one keep-alive connection
pool, driven from synchronous code.

Rules:
- `complete(bodies)` sends every body to `/v1/completions` at once (at most `concurrency` in flight)
  and returns the answers in order, or raises RemoteError; it never waits longer than `deadline_s`,
  so a search never hangs on a dead server, and what it started is cancelled before it returns or
  raises (Ctrl-C included): no request or task outlives the call (loop_thread.py).
- Connection errors, timeouts and 5xx answers are retried `retries` times with exponential backoff;
  a 4xx answer is the caller's mistake (an unknown model name, a prompt longer than the server's
  context) and is reported at once, with the server's own message.
- Every answer is untrusted: it is read within bounds (bounded_answer.py: its size, its time, its
  JSON values; an answer past one is not retried) into typed values of no more than was asked
  (answers.py); JSON of another shape, or something other than JSON, is one line naming the server,
  and the server's own text reaches a message only through `safe_text`.
- A probe (the checks when a session opens: the model list, tokenize, a one-token completion) waits
  at most PROBE_TIMEOUT_S and does not retry a timeout: a server that does not answer is reported in
  seconds, not after every retry of the search's own timeout (minutes).
- The event loop runs on one daemon thread (`LoopThread`) for the client's lifetime, and `close()`
  stops it; clients of several servers may share one (pool.py), and then the pool stops it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import httpx

from edgereason.backends.remote.answers import (
    Asked,
    Completion,
    TooMuch,
    Wrong,
    read_completion,
    read_models,
)
from edgereason.backends.remote.bounded_answer import (
    ACCEPT_ENCODING,
    Answer,
    Bounds,
    header_overrun,
    load_json,
    receive,
)
from edgereason.backends.remote.errors import RemoteError, Unreachable, unreadable
from edgereason.backends.remote.loop_thread import LoopThread, gather_all
from edgereason.backends.remote.server_messages import redirect_to, refusal_hint, server_message
from edgereason.backends.remote_settings import BACKOFF_S, PROBE_TIMEOUT_S, Endpoint
from edgereason.errors import ConfigError, EdgeReasonError
from edgereason.util.terminal import safe_text

T = TypeVar("T")
COMPLETIONS = "/v1/completions"


@dataclass
class ClientStats:
    requests: int = 0  # HTTP requests answered, retries included
    batches: int = 0  # complete() calls
    retries: int = 0
    wait_s: float = 0.0  # time the caller spent waiting on complete()
    prompt_tokens: int = 0  # as the server reports them (`usage`)
    completion_tokens: int = 0
    per_batch: list[int] = field(default_factory=list)  # requests per complete() call

    def count(self, answer: Completion) -> None:
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens


class CompletionClient:
    def __init__(
        self,
        endpoint: Endpoint,
        runner: LoopThread | None = None,
        stats: ClientStats | None = None,
    ) -> None:
        """runner: a loop thread shared with other clients (the owner stops it), else one of its
        own. stats: shared with other clients, to count their requests together."""
        self.endpoint = endpoint
        self.stats = stats if stats is not None else ClientStats()
        self._owns_runner = runner is None
        self._runner = runner or LoopThread()
        self._loop, self._thread = self._runner.loop, self._runner.thread
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            self._http: httpx.AsyncClient = self._call(
                self._open(headers), endpoint.connect_timeout_s + 5
            )
        except BaseException:
            if self._owns_runner:
                self._runner.stop()
            raise
        self._model = endpoint.model

    async def _open(self, headers: dict[str, str]) -> httpx.AsyncClient:
        e = self.endpoint
        limits = httpx.Limits(
            max_connections=e.concurrency, max_keepalive_connections=e.concurrency
        )
        try:  # trust_env=False: no proxy from the environment between us and the server
            return httpx.AsyncClient(
                base_url=e.address,
                headers=headers,
                limits=limits,
                trust_env=False,
                timeout=httpx.Timeout(e.timeout_s, connect=e.connect_timeout_s),
            )
        except httpx.InvalidURL as err:  # settings.check_url asks httpx too: a last guard
            refused = safe_text(str(err), one_line=True)
            raise ConfigError(
                f"--base-url {e.root} is refused by the HTTP client ({refused})"
            ) from None

    @property
    def model(self) -> str:
        """The served model name: the endpoint's, else the first the server lists (asked once, as a
        probe)."""
        if self._model is None:
            asking = self._request("GET", "/v1/models", None, read_models, probe=True)
            names = self._call(asking, self._probe_s)
            if not names:
                root = self.endpoint.root
                raise RemoteError(f"the server at {root} lists no models; pass --served-model NAME")
            self._model = names[0]
        return self._model

    def complete(self, bodies: Sequence[dict[str, Any]], probe: bool = False) -> list[Completion]:
        """POST each body (the served model name added) to /v1/completions, concurrently; answers in
        order. probe: a check at opening (module docstring)."""
        if not bodies:
            return []
        model = self.model
        deadline = self._probe_s if probe else self.endpoint.deadline_s
        t0 = time.perf_counter()
        try:
            return self._call(
                self._gather([{"model": model, **b} for b in bodies], probe), deadline
            )
        finally:
            self.stats.batches += 1
            self.stats.per_batch.append(len(bodies))
            self.stats.wait_s += time.perf_counter() - t0

    def ask(self, path: str, body: dict[str, Any]) -> Any:
        """POST `body` to an endpoint the server may not have (`/tokenize`), as a probe: its JSON,
        or None where it answers 4xx or 5xx, or with something other than JSON. A server that
        cannot be reached is still an error."""
        asking = self._request("POST", path, body, _as_is, optional=True, probe=True)
        return self._call(asking, self._probe_s)

    def close(self) -> None:
        if self._loop.is_closed() or self._http.is_closed:
            return
        try:
            self._call(self._http.aclose(), 5)
        # a wedged loop: stopping it below is all that is left
        except (EdgeReasonError, RuntimeError):
            pass
        if self._owns_runner:
            self._runner.stop()

    @property
    def _probe_s(self) -> float:
        return self.endpoint.probe_deadline_s

    # ------------------------------------------------------------------ the loop thread
    async def completion(self, body: dict[str, Any], probe: bool = False) -> Completion:
        """One POST of `body` to /v1/completions on the loop thread (the served model name added;
        `model` asked before): its answer, of no more than it asked for."""
        body = {"model": self._model, **body}
        read = partial(read_completion, asked=Asked.of(body))
        answer = await self._request("POST", COMPLETIONS, body, read, probe=probe)
        self.stats.count(answer)
        return answer

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return self._runner.call(coro, timeout, f"the server at {self.endpoint.root}")

    async def _gather(self, bodies: list[dict[str, Any]], probe: bool) -> list[Completion]:
        gate = asyncio.Semaphore(self.endpoint.concurrency)

        async def one(body: dict[str, Any]) -> Completion:
            async with gate:
                return await self.completion(body, probe)

        return await gather_all([one(b) for b in bodies])

    async def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        read: Callable[[Any], T],
        optional: bool = False,
        probe: bool = False,
    ) -> T:
        """The answer read by `read`, after retries (module docstring). optional: None for an answer
        of 4xx, 5xx or not JSON (an endpoint the server lacks)."""
        e, bounds = self.endpoint, self._bounds(probe)
        timeout = httpx.Timeout(bounds.wait_s, connect=e.connect_timeout_s)  # between bytes
        last = ""
        for attempt in range(e.retries + 1):
            if attempt:
                self.stats.retries += 1
                await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
            request = self._http.build_request(method, path, json=body, timeout=timeout)
            try:
                answer = await receive(self._http, request, bounds)
            except (httpx.TimeoutException, TimeoutError):
                last = f"no answer within {bounds.wait_s:.0f}s"
                if probe:  # a server that does not answer a probe in time is not serving
                    break
                continue
            # refused, reset, closed mid-answer, not HTTP at all
            except httpx.TransportError as err:
                if overrun := header_overrun(err, e.root, path):
                    raise overrun from None
                said = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
                last = safe_text(said, one_line=True)
                continue
            self.stats.requests += 1
            if answer.status >= 500 and not optional:
                last = f"HTTP {answer.status}: {server_message(answer)}"
                continue
            return self._read(answer, bounds, path, read, optional)
        raise Unreachable(e.root, last, attempt + 1)

    def _bounds(self, probe: bool) -> Bounds:
        """What one answer may be: a probe waits at most PROBE_TIMEOUT_S."""
        e = self.endpoint
        if probe and e.timeout_s > PROBE_TIMEOUT_S:
            waits = "the most a check at opening waits"
            return Bounds(e.root, PROBE_TIMEOUT_S, e.max_answer_bytes, waits)
        return Bounds(e.root, e.timeout_s, e.max_answer_bytes)

    def _read(
        self, answer: Answer, bounds: Bounds, path: str, read: Callable[[Any], T], optional: bool
    ) -> T:
        """A 2xx answer read by `read`; RemoteError (one line) for anything else."""
        status, root = answer.status, self.endpoint.root
        if optional and not 200 <= status < 300:  # an endpoint it lacks: not retried
            return None  # type: ignore[return-value]
        if status >= 400:
            message = server_message(answer)
            refused = f"the server at {root} refused the request (HTTP {status})"
            raise RemoteError(f"{refused}: {message}{refusal_hint(status, message)}")
        if not 200 <= status < 300:  # a redirect (not followed: it could lead anywhere), or 1xx
            raise RemoteError(
                f"the server at {root} answered {path} with HTTP {status}{redirect_to(answer)}"
            )
        try:
            return read(load_json(answer, bounds, path))
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past Python's depth
            if optional:
                return None  # type: ignore[return-value]
            raise unreadable(root, path, "something other than JSON") from None
        except TooMuch as excess:
            raise unreadable(root, path, str(excess)) from None
        except Wrong as wrong:
            raise unreadable(root, path, f"JSON of another shape: {wrong}") from None


def _as_is(data: Any) -> Any:
    return data
