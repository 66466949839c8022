"""The remote backend's event loop on one daemon thread, and synchronous calls into it that leave
nothing running.

Rules:
- `call` returns only once its coroutine has ended: on an error, the deadline or a stop signal
  (Ctrl-C, SIGTERM) the task is cancelled and its cancellation awaited (cancelling the caller's
  future alone returns at once, while the task still unwinds; the loop was then closed under it:
  "Task was destroyed but it is pending", "Exception ignored ... Event loop is closed" after a
  signal).
- `stop` cancels and awaits whatever is left, finalizes async generators, then stops and closes the
  loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from edgereason.backends.remote.errors import RemoteError

T = TypeVar("T")
UNWIND_S = 5.0  # the most a cancelled call may take to unwind before the caller goes on


async def gather_all(coros: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Their results in order; when one fails (or the caller is cancelled) the rest are cancelled
    and awaited, so none outlives the call."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class LoopThread:
    """An event loop on a daemon thread, and synchronous calls into it that leave nothing running
    behind them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="edgereason-http", daemon=True
        )
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float, who: str) -> T:
        """Run `coro` on the loop thread and wait for it, at most `timeout` seconds; on any exit but
        its result the task is cancelled and its end awaited first. `who`: the server(s) a deadline
        names."""
        ended = threading.Event()
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:  # on the loop thread; a cancel sent after it runs after it
            task = self.loop.create_task(coro)
            task.add_done_callback(lambda _: ended.set())
            tasks.append(task)

        self.loop.call_soon_threadsafe(start)
        try:
            if not ended.wait(timeout):
                late = f"{who} did not answer within {timeout:.0f}s"
                raise RemoteError(f"{late}; is it overloaded? (--remote-timeout)")
            return tasks[0].result()
        finally:
            # the deadline, or a stop signal raised in this thread while it waited
            if not ended.is_set():
                self.loop.call_soon_threadsafe(lambda: tasks[0].cancel())
                ended.wait(UNWIND_S)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_drain(), self.loop).result(UNWIND_S)
            except (FutureTimeout, RuntimeError):  # a wedged loop: stopping it is all that is left
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=UNWIND_S)
        if not self.thread.is_alive():
            self.loop.close()


async def _drain() -> None:
    """Cancel and await every task but this one; finalize async generators while the loop still
    runs."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()
