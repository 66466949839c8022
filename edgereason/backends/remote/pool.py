"""Several servers of one model behind one client (`--base-url URL1,URL2`): each request goes to one
of them, all in flight together on one event loop, and a server that stops answering hands its
requests to the others.

Routing (`ServerPool.send(bodies, homes)`, each body's server chosen when it is sent):
- least in flight: a request goes to the live server with the fewest requests in flight (sent and
  not answered yet, those waiting for a connection included), the first listed on a tie;
- prefix affinity: a request may name a home, the server that answered its path's previous request
  and so holds the path's prefix in its prompt cache (the generator: a sequence's, inherited by its
  forks; the PRM: the parent path's). It goes home unless home has AFFINITY_SLACK or more requests
  in flight beyond the least-loaded live server; then it goes to that one. Either way the server
  that answers is the path's home from then on. A server that stops answering (no answer after its
  retries: refused, reset, timed out, 5xx) is left out for the rest of the session, and of every
  pool sharing its `Outages`: stderr gets one line, and its requests, those in flight included, go
  to the others. Only when the last one goes does a call fail, with one line. A 4xx answer is the
  request's fault, not the server's: it is raised at once, as with one server."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from edgereason.backends.remote.answers import Completion
from edgereason.backends.remote.client import ClientStats, CompletionClient
from edgereason.backends.remote.errors import RemoteError, Unreachable
from edgereason.backends.remote.loop_thread import LoopThread, gather_all
from edgereason.backends.remote_settings import Endpoint

# in-flight requests home may have beyond the least-loaded server before a path moves
AFFINITY_SLACK = 2


class Reply(NamedTuple):
    answer: Completion
    server: int  # the index of the server that answered, in the pool's list


def choose_server(in_flight: Sequence[int], live: Sequence[int], home: int | None) -> int:
    """The routing rule (module docstring): home unless it is gone or AFFINITY_SLACK busier, else
    least in flight."""
    least = min(live, key=lambda i: (in_flight[i], i))
    if home in live and in_flight[home] < in_flight[least] + AFFINITY_SLACK:
        return home
    return least


class Outages:
    """The servers of a session that stopped answering, shared by its pools so that each is reported
    once."""

    def __init__(self) -> None:
        self.gone: set[str] = set()
        # the generator's and the PRM's pools run on threads of their own
        self._lock = threading.Lock()

    def report(self, err: Unreachable, others: int) -> None:
        """One line on stderr, the first time a server is found gone; `others`: the servers left to
        its pool."""
        with self._lock:
            if err.root in self.gone:
                return
            self.gone.add(err.root)
        print(
            f"edgereason: the server at {err.root} stopped answering ({err.detail}); its requests "
            f"go to the other {others} server{'s' if others > 1 else ''}",
            file=sys.stderr,
            flush=True,
        )


class ServerPool:
    """The same calls as a CompletionClient (`complete`, `stats`, `close`) over one or more
    servers."""

    def __init__(self, endpoints: Sequence[Endpoint], outages: Outages | None = None) -> None:
        if not endpoints:
            raise ValueError("a pool needs at least one server")
        self.endpoints = tuple(endpoints)
        self.roots = tuple(e.root for e in self.endpoints)
        self.outages = outages or Outages()
        self.stats = ClientStats()  # every server's requests together
        self.answered = [0] * len(self.endpoints)  # requests each server answered
        self._runner = LoopThread()
        self._loop, self._thread = self._runner.loop, self._runner.thread
        self._clients: list[CompletionClient] = []
        self._in_flight = [0] * len(self.endpoints)
        self._gates = [asyncio.Semaphore(e.concurrency) for e in self.endpoints]
        try:
            self._clients += [CompletionClient(e, self._runner, self.stats) for e in self.endpoints]
        except BaseException:
            self.close()
            raise

    def ask_models(self) -> None:
        """Each live server's model name, asked once (--served-model spares it): RemoteError, one
        line, where a server is down."""
        for i in self._live():
            self._clients[i].model  # noqa: B018 - cached after the first time

    def requests_per_server(self) -> dict[str, int]:
        return dict(zip(self.roots, self.answered))

    def complete(self, bodies: Sequence[dict[str, Any]]) -> list[Completion]:
        """Answers in order, each from the least-loaded server (no path to keep on one)."""
        return [reply.answer for reply in self.send(bodies, [None] * len(bodies))]

    def send(self, bodies: Sequence[dict[str, Any]], homes: Sequence[int | None]) -> list[Reply]:
        """POST each body to /v1/completions on the server the routing rule picks for it and its
        home; all in flight at once. Answers in order, each with the server that gave it."""
        if not bodies:
            return []
        self.ask_models()  # the bodies name the served model
        # every server's deadline in turn: a request may fail over through each
        deadline = sum(e.deadline_s for e in self.endpoints)
        t0 = time.perf_counter()
        try:
            who = f"the server{'s' if len(self.roots) > 1 else ''} at {', '.join(self.roots)}"
            return self._runner.call(self._send_all(bodies, homes), deadline, who)
        finally:
            self.stats.batches += 1
            self.stats.per_batch.append(len(bodies))
            self.stats.wait_s += time.perf_counter() - t0

    def close(self) -> None:
        if self._loop.is_closed():
            return
        for client in self._clients:
            client.close()
        self._runner.stop()

    # ------------------------------------------------------------------ the loop thread
    async def _send_all(
        self, bodies: Sequence[dict[str, Any]], homes: Sequence[int | None]
    ) -> list[Reply]:
        return await gather_all([self._send(body, home) for body, home in zip(bodies, homes)])

    async def _send(self, body: dict[str, Any], home: int | None) -> Reply:
        while True:
            if not (live := self._live()):  # the other role's pool lost the last of these servers
                raise RemoteError(f"every server at {', '.join(self.roots)} stopped answering")
            server = choose_server(self._in_flight, live, home)
            self._in_flight[server] += 1
            try:
                async with self._gates[server]:
                    answer = await self._clients[server].completion(body)
            except Unreachable as err:
                self._lose(err)
                continue
            finally:
                self._in_flight[server] -= 1
            self.answered[server] += 1
            return Reply(answer, server)

    def _live(self) -> list[int]:
        return [i for i, root in enumerate(self.roots) if root not in self.outages.gone]

    def _lose(self, err: Unreachable) -> None:
        """A server stopped answering: left out from now on (one line); RemoteError when it was the
        last."""
        others = [i for i in self._live() if self.roots[i] != err.root]
        if not others:
            if len(self.roots) == 1:
                raise err
            raise RemoteError(
                f"all {len(self.roots)} servers stopped answering; the last: {err}"
            ) from None
        self.outages.report(err, len(others))
