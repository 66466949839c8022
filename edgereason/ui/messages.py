"""Textual messages the worker thread posts to the app (post_message is thread-safe; nothing else
crosses)."""

from __future__ import annotations

from textual.message import Message

from edgereason.engine.events import Event


class EngineEvent(Message):
    """One engine event, unchanged (events are immutable NamedTuples, safe to hand across
    threads)."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class RunnerStatus(Message):
    """What the worker is doing when there is no search to show: loading, pulling, ready."""

    def __init__(self, text: str, ready: bool = False) -> None:
        super().__init__()
        self.text = text
        self.ready = ready


class RunnerNote(Message):
    """A line the session would have said on stderr, which the app's screen holds: the chat log
    shows it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class RunnerFailed(Message):
    """A problem the engine refused (no RequestDone follows) or, if fatal, models that did not
    load."""

    def __init__(self, error: str, fatal: bool = False) -> None:
        super().__init__()
        self.error = error
        self.fatal = fatal
