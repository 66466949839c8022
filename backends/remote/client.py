"""An OpenAI-compatible completions client: many requests in flight on one keep-alive connection pool, driven
from synchronous code.

Rules:
- `complete(bodies)` sends every body to `/v1/completions` at once (at most `concurrency` in flight) and returns
  the responses in order, or raises RemoteError; it never waits longer than `deadline_s`, so a search never hangs on
  a dead server, and what it started is cancelled before it returns or raises (Ctrl-C included): no request or
  task outlives the call.
- Connection errors, timeouts and 5xx answers are retried `retries` times with exponential backoff; a 4xx answer
  is the caller's mistake (an unknown model name, a prompt longer than the server's context) and is reported at
  once, with the server's own message.
- The event loop runs on one daemon thread (`LoopThread`) for the client's lifetime, and `close()` stops it; clients
  of several servers may share one (pool.py), and then the pool stops it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from edgereason.backends.remote_settings import BACKOFF_S, Endpoint
from edgereason.errors import EdgeReasonError

T = TypeVar("T")


async def gather_all(coros: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Their results in order; when one fails (or the caller is cancelled) the rest are cancelled and awaited, so
    none outlives the call."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class RemoteError(EdgeReasonError):
    """The server refused a request, or could not be reached."""


class Unreachable(RemoteError):
    """No answer after every retry (refused, reset, timed out, 5xx): the server is down or stopped answering."""

    def __init__(self, root: str, detail: str, tries: int) -> None:
        tried = f"{tries} tries" if tries > 1 else "1 try"
        super().__init__(f"cannot reach the server at {root} ({detail}) after {tried}; is it running?")
        self.root = root
        self.detail = detail


@dataclass
class ClientStats:
    requests: int = 0  # HTTP requests answered, retries included
    batches: int = 0  # complete() calls
    retries: int = 0
    wait_s: float = 0.0  # time the caller spent waiting on complete()
    prompt_tokens: int = 0  # as the server reports them (`usage`)
    completion_tokens: int = 0
    per_batch: list[int] = field(default_factory=list)  # requests per complete() call


class LoopThread:
    """An event loop on a daemon thread, and synchronous calls into it that leave nothing running behind them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="edgereason-http", daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float, who: str) -> Any:
        """Run `coro` on the loop thread and wait for it; on any exit but its result (an error, the deadline,
        Ctrl-C) the task is cancelled and awaited, so nothing keeps running behind the caller's back. `who`: the
        server(s) a deadline names."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise RemoteError(
                f"{who} did not answer within {timeout:.0f}s; is it overloaded? (--remote-timeout)"
            ) from None
        finally:
            if not future.done():
                future.cancel()
                try:
                    future.result(5)  # the cancellation has run: the loop holds no task of this call
                except (FutureCancelled, FutureTimeout, Exception):  # noqa: BLE001 - only waiting for the end
                    pass

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class CompletionClient:
    def __init__(self, endpoint: Endpoint, runner: LoopThread | None = None, stats: ClientStats | None = None) -> None:
        """runner: a loop thread shared with other clients (the owner stops it), else one of its own. stats: shared
        with other clients, to count their requests together."""
        self.endpoint = endpoint
        self.stats = stats if stats is not None else ClientStats()
        self._owns_runner = runner is None
        self._runner = runner or LoopThread()
        self._loop, self._thread = self._runner.loop, self._runner.thread
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http: httpx.AsyncClient = self._call(self._open(headers), endpoint.connect_timeout_s + 5)
        self._model = endpoint.model

    async def _open(self, headers: dict[str, str]) -> httpx.AsyncClient:
        e = self.endpoint
        limits = httpx.Limits(max_connections=e.concurrency, max_keepalive_connections=e.concurrency)
        # trust_env=False: no proxy from the environment between us and the server
        return httpx.AsyncClient(
            base_url=e.root,
            headers=headers,
            limits=limits,
            trust_env=False,
            timeout=httpx.Timeout(e.timeout_s, connect=e.connect_timeout_s),
        )

    @property
    def model(self) -> str:
        """The served model name: the endpoint's, else the first the server lists (asked once)."""
        if self._model is None:
            answer = self._call(self._request("GET", "/v1/models", None), self.endpoint.deadline_s)
            data = answer.get("data") or []
            if not data or "id" not in data[0]:
                raise RemoteError(f"the server at {self.endpoint.root} lists no models; pass --served-model NAME")
            self._model = str(data[0]["id"])
        return self._model

    def complete(self, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """POST each body (the served model name added) to /v1/completions, concurrently; answers in order."""
        if not bodies:
            return []
        model = self.model
        t0 = time.perf_counter()
        try:
            return self._call(self._gather([{"model": model, **b} for b in bodies]), self.endpoint.deadline_s)
        finally:
            self.stats.batches += 1
            self.stats.per_batch.append(len(bodies))
            self.stats.wait_s += time.perf_counter() - t0

    def ask(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST `body` to an endpoint the server may not have (`/tokenize`): None where it answers 4xx or 5xx, or
        with something other than JSON. A server that cannot be reached is still an error."""
        return self._call(self._request("POST", path, body, optional=True), self.endpoint.deadline_s)

    def close(self) -> None:
        if self._loop.is_closed() or self._http.is_closed:
            return
        try:
            self._call(self._http.aclose(), 5)
        except (EdgeReasonError, RuntimeError):  # a wedged loop: stopping it below is all that is left
            pass
        if self._owns_runner:
            self._runner.stop()

    # ------------------------------------------------------------------ the loop thread
    async def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """One POST to /v1/completions on the loop thread (the served model name added; `model` asked before)."""
        return await self._request("POST", "/v1/completions", {"model": self._model, **body})

    def _call(self, coro: Any, timeout: float) -> Any:
        return self._runner.call(coro, timeout, f"the server at {self.endpoint.root}")

    async def _gather(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        gate = asyncio.Semaphore(self.endpoint.concurrency)

        async def one(body: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                return await self._request("POST", "/v1/completions", body)

        return await gather_all([one(b) for b in bodies])

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None, optional: bool = False
    ) -> dict[str, Any] | None:
        e = self.endpoint
        last = ""
        for attempt in range(e.retries + 1):
            if attempt:
                self.stats.retries += 1
                await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                response = await self._http.request(method, path, json=body)
            except httpx.TimeoutException:
                last = f"no answer within {e.timeout_s:.0f}s"
                continue
            except httpx.TransportError as err:  # refused, reset, closed mid-answer
                last = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
                continue
            self.stats.requests += 1
            if optional and response.status_code >= 400:  # an endpoint it lacks, or reads otherwise: not retried
                return None
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {_message(response)}"
                continue
            if response.status_code >= 400:
                message = _message(response)
                raise RemoteError(
                    f"the server at {e.root} refused the request (HTTP {response.status_code}): "
                    f"{message}{_hint(response.status_code, message)}"
                )
            try:
                answer = response.json()
            except ValueError:
                if optional:
                    return None
                raise RemoteError(
                    f"the server at {e.root} answered {path} with something other than JSON; is "
                    "it an OpenAI-compatible server?"
                ) from None
            usage = answer.get("usage") or {}
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.stats.completion_tokens += int(usage.get("completion_tokens") or 0)
            return answer
        raise Unreachable(e.root, last, e.retries + 1)


def _message(response: httpx.Response) -> str:
    """The server's error message on one line (OpenAI style `{"error": {"message": ...}}`, FastAPI's `detail`)."""
    try:
        data = response.json()
    except ValueError:
        text = response.text
    else:
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            text = str(err["message"])
        elif isinstance(data, dict) and data.get("detail"):
            text = json.dumps(data["detail"]) if not isinstance(data["detail"], str) else data["detail"]
        else:
            text = response.text
    line = " ".join(text.split())
    return line[:300] + ("..." if len(line) > 300 else "")


def _hint(status: int, message: str) -> str:
    if status == 400 and "context" in message.lower():  # a prompt longer than the server's context
        return (
            " (start that server with a longer context: llama-server -c, llama-cpp-python --n_ctx, vLLM "
            "--max-model-len)"
        )
    if status == 404:
        return " (check --base-url and --served-model)"
    if status in (401, 403):
        return " (check --api-key-env)"
    if status == 422:  # FastAPI's refusal of a body's fields: a prompt sent as token ids, for one
        return (
            " (prompts go as token ids; llama-cpp-python's own server takes them only as "
            "python -m edgereason.backends.remote.llamacpp_server)"
        )
    return ""
