"""The child process that compares answers as math (math-verify), run by path by compare.py: it
reads one JSON line [a, b, seconds] a comparison and writes {"match": true | false | null}, null
where math-verify failed or ran out of time. It imports nothing of EdgeReason's, so it starts in
about half a second. One timer (SIGALRM, its main thread's) bounds a whole comparison, parsing
included (math-verify's own timeouts are whole seconds each, for parse and verify apart); the
parent kills it where a computation in C ignores the alarm. Its stderr goes nowhere: math-verify's
warnings never reach the terminal."""

from __future__ import annotations

import ctypes
import json
import logging
import signal
import sys
from functools import lru_cache

PR_SET_PDEATHSIG = 1  # Linux's prctl: a signal for this process when its parent ends


class OutOfTime(BaseException):
    """Raised by the timer: not an Exception, which math-verify catches (and goes on) in places."""


def _out_of_time(signum: int, frame: object) -> None:
    raise OutOfTime


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: its pipe's end ends this
    try:  # a parent killed with SIGKILL leaves no comparison running on (a power tower, in C)
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the pipe's end still ends it between comparisons
        pass
    logging.disable(logging.CRITICAL)
    from math_verify import parse, verify

    @lru_cache(maxsize=4096)
    def parsed(answer: str) -> tuple:
        text = answer.strip()
        return tuple(parse(text if text.startswith("$") else f"${text}$", parsing_timeout=None))

    def compare(a: str, b: str) -> bool:
        pa, pb = parsed(a), parsed(b)
        return bool(pa and pb and verify(list(pb), list(pa), timeout_seconds=None))

    signal.signal(signal.SIGALRM, _out_of_time)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        a, b, seconds = json.loads(line)
        signal.setitimer(signal.ITIMER_REAL, max(0.01, float(seconds)))
        try:
            match: bool | None = compare(a, b)
        except (OutOfTime, Exception):  # noqa: BLE001 - out of time, or anything sympy raised
            match = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        print(json.dumps({"match": match}), flush=True)


if __name__ == "__main__":
    main()
