"""Stop signals end a run at any moment, after `finally` and `with` blocks have cleaned up: Ctrl-C
(SIGINT) exits 130, kill (SIGTERM) 143, a closed terminal (SIGHUP) 129.

Python runs a signal's handler in the main thread at its next bytecode. During a long C call that
calls back into Python (llama.cpp's log and model-load progress callbacks) that bytecode is the
callback's, and ctypes prints an exception raised there and drops it: the Ctrl-C is lost and the run
goes on. Rules:
- `stop_signals()` wraps a whole CLI run: SIGTERM and SIGHUP raise `Stopped`, a KeyboardInterrupt,
  as SIGINT raises KeyboardInterrupt. A signal the parent process set to be ignored (nohup) stays
  ignored. A stop that ctypes drops in a callback is not printed (it would show the user a
  traceback): `check()` raises it.
- `deferred()` wraps C calls that call back into Python: a stop signal there only sets a flag, which
  a callback that can end its call early reads through `requested()`; the signal's exception is
  raised when the block ends, in place of whatever the ended call raised.
- Calls too frequent to wrap (every `llama_decode`, whose log callback can run Python) call
  `check()` after returning: it raises a stop signal whose exception a callback swallowed. (Seen on
  a GPU: 5 of 15 processes time-boxed by SIGTERM ran on to the end of their work.)"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

_pending: list[int] = []  # stop signals that arrived inside deferred()
_fired: list[int] = []  # stop signals raised inside stop_signals(), until the block ends


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(stop: KeyboardInterrupt) -> int:
    """The shell's convention: 128 + the signal's number."""
    return 128 + (stop.signum if isinstance(stop, Stopped) else signal.SIGINT)


def describe(stop: KeyboardInterrupt) -> str:
    return f"stopped by {stop.args[0]}" if isinstance(stop, Stopped) else "interrupted"


def _exception(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def _raise(signum: int, frame: object) -> None:
    _fired.append(signum)
    raise _exception(signum)


def _defer(signum: int, frame: object) -> None:
    _pending.append(signum)


def _in_main_thread() -> bool:
    # the only thread Python runs handlers in
    return threading.current_thread() is threading.main_thread()


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Stopped` inside the block; their previous handlers come back after
    it."""
    default = [
        s
        for s in STOP_SIGNALS
        if _in_main_thread()
        and signal.getsignal(s)
        == (signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    ]
    previous_hook = sys.unraisablehook

    # ctypes reports an exception raised in a callback here, then drops it
    def quiet_stops(unraisable) -> None:
        if not (_fired and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            previous_hook(unraisable)

    sys.unraisablehook = quiet_stops
    try:
        with _installed({s: _raise for s in default}):
            yield
    finally:
        sys.unraisablehook = previous_hook
        _fired.clear()


@contextmanager
def _installed(handlers: dict[int, Callable]) -> Iterator[None]:
    """`handlers` (signal -> handler) for the block; the handlers they replaced come back after
    it."""
    previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def check() -> None:
    """Raise a stop signal whose exception was raised inside a C callback and dropped there
    (once)."""
    if _fired:
        signum = _fired[0]
        _fired.clear()
        raise _exception(signum)


def requested() -> bool:
    """Whether a stop signal arrived inside `deferred()`: a callback that can end its C call early
    does so."""
    return bool(_pending)


@contextmanager
def deferred() -> Iterator[None]:
    """Stop signals that would raise only set `requested()` inside the block; the first one is
    raised when it ends. Nested blocks defer to the outermost."""
    raising = [
        s
        for s in STOP_SIGNALS
        if _in_main_thread() and signal.getsignal(s) in (signal.default_int_handler, _raise)
    ]
    try:
        with _installed({s: _defer for s in raising}):
            yield
    finally:
        if raising and _pending:
            signum = _pending[0]
            _pending.clear()
            raise _exception(signum)
