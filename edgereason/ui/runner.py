"""The chat worker: loads the models once, then runs one search at a time. `run` is the only code
that touches the session and engine (neither is thread-safe); the UI talks to it through `submit`,
`cancel` and `stop`, which only set flags and fill a queue."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from textual.message import Message

from edgereason.config import SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import Policy
from edgereason.errors import EdgeReasonError
from edgereason.session.opening import Session
from edgereason.ui.messages import EngineEvent, RunnerFailed, RunnerNote, RunnerStatus
from edgereason.ui.relay import EventRelay

PullProgress = Callable[[str, int, int], None]
SessionFactory = Callable[[PullProgress], Session]
POLL_S = 0.05


class Stopped(Exception):
    """Raised inside a model pull when the app quits, so a download does not hold the exit."""


class SearchRunner:
    def __init__(
        self, factory: SessionFactory, policy: Policy, post: Callable[[Message], object]
    ) -> None:
        self._factory = factory
        self._policy = policy
        self._post = post
        self._problems: queue.Queue[tuple[str, SearchConfig]] = queue.Queue()
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self.finished = threading.Event()

    # ------------------------------------------------------------------ UI thread
    def submit(self, problem: str, config: SearchConfig) -> None:
        self._cancel.clear()
        self._problems.put((problem, config))

    def cancel(self) -> None:
        self._cancel.set()

    def stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ worker thread
    def run(self) -> None:
        try:
            session = self._open()
            if session is None:
                return
            try:
                for text in session.take_start_notes():
                    self._post(RunnerNote(text))
                relay = EventRelay(lambda event: self._post(EngineEvent(event)))
                engine = session.engine(self._policy, on_event=relay)
                self._post(RunnerStatus("ready", ready=True))
                while not self._stop.is_set():
                    try:
                        problem, config = self._problems.get(timeout=POLL_S)
                    except queue.Empty:
                        continue
                    self._solve(engine, problem, config)
                    relay.flush()
            finally:
                session.close()
        finally:
            self.finished.set()

    def _open(self) -> Session | None:
        self._post(RunnerStatus("loading models..."))
        last = 0.0

        def progress(label: str, done: int, total: int) -> None:
            nonlocal last
            if self._stop.is_set():
                raise Stopped
            if time.monotonic() - last > 0.2 or done >= total:
                last = time.monotonic()
                self._post(RunnerStatus(f"pulling model: {label} ({done}/{total})"))

        try:
            return self._factory(progress)
        except Stopped:
            return None
        # a missing or broken model must not kill the app: show it, stay quittable
        except Exception as e:
            self._post(RunnerFailed(f"the models did not load: {e}", fatal=True))
            return None

    def _solve(self, engine: Engine, problem: str, config: SearchConfig) -> None:
        try:
            request = engine.submit(problem, config)
        except EdgeReasonError as e:
            self._post(RunnerFailed(str(e)))
            return
        # a bug, not the user's problem: if it ended the worker, the UI would search forever
        except Exception as e:
            self._post(RunnerFailed(f"the search could not start: {e!r}"))
            return
        try:
            while engine.busy:
                if self._cancel.is_set() or self._stop.is_set():
                    engine.cancel(request.id)
                    break
                engine.step()
        # keep the app alive: the request ends (RequestDone says why), memory is freed
        except Exception as e:
            engine.cancel(request.id, reason=f"the search failed: {e!r}")
