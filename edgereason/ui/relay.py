"""The engine listener used by the chat worker: forwards events as Textual messages without flooding
the UI."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from edgereason.engine.events import Event, NodeExtended, Progress

INTERVAL_S = 0.1


def _latest_wins(event: Event) -> Hashable | None:
    """Events where only the newest copy matters (whole step text so far, status counters) get a
    key."""
    if isinstance(event, NodeExtended):
        return ("text", event.node_id)
    if isinstance(event, Progress):
        return ("progress", event.request_id)
    return None


class EventRelay:
    """Called by the engine in the worker thread. Step-level events go out at once; token-level ones
    are held, latest per key, and sent at most every `interval` seconds, and always before the next
    step-level event so the UI never sees a step end before its final text."""

    def __init__(
        self,
        post: Callable[[Event], object],
        interval: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._post = post
        self._interval = interval
        self._clock = clock
        self._held: dict[Hashable, Event] = {}
        self._sent_at = float("-inf")

    def __call__(self, event: Event) -> None:
        key = _latest_wins(event)
        if key is None:
            self.flush()
            self._post(event)
            return
        self._held[key] = event
        if self._clock() - self._sent_at >= self._interval:
            self.flush()

    def flush(self) -> None:
        held, self._held = self._held, {}
        self._sent_at = self._clock()
        for event in held.values():
            self._post(event)
