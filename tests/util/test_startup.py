"""The start-up's phase timer: nested phases counted once (the innermost open one), a first call
timed once a process, and the seconds since the command."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from edgereason.util import startup


@pytest.fixture()
def clock(monkeypatch):
    """A fresh timer on a clock the test moves."""
    monkeypatch.setattr(startup, "_seconds", {})
    monkeypatch.setattr(startup, "_times", {})
    monkeypatch.setattr(startup, "_open", [])
    monkeypatch.setattr(startup, "_firsts", set())
    now = [100.0]
    monkeypatch.setattr(startup.time, "perf_counter", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def test_time_goes_to_the_innermost_phase(clock):
    with startup.phase("first_pass"):
        clock(1.0)
        with startup.phase("graphs"):
            clock(2.0)
            startup.enter("compiles")
            clock(4.0)
            startup.leave("compiles")
            clock(0.5)
        clock(0.25)
    with startup.phase("graphs"):  # a second capture adds to the first
        clock(1.0)
    assert startup.seconds() == {"first_pass": 1.25, "graphs": 3.5, "compiles": 4.0}
    assert startup.summary() == (
        "start-up phases (s): first pass 1.25, graphs captured 3.50 (2 times), compiles 4.00"
    )


def test_phases_come_in_start_up_order_and_a_raise_still_closes_one(clock):
    with pytest.raises(RuntimeError), startup.phase("kv"):
        clock(1.0)
        raise RuntimeError("no room")
    with startup.phase("import"):
        clock(2.0)
    assert list(startup.seconds()) == ["import", "kv"]
    assert startup.summary() == "start-up phases (s): import 2.00, KV allocated 1.00"


def test_a_phase_as_a_decorator_and_a_first_call(clock):
    @startup.phase("weights")
    def load() -> str:
        clock(3.0)
        return "weights"

    @startup.first_call("first_pass")
    def step(n: int) -> int:
        clock(0.5)
        return n

    assert load() == "weights" and load() == "weights"
    assert [step(1), step(2), step(3)] == [1, 2, 3]
    assert startup.seconds() == {"weights": 6.0, "first_pass": 0.5}


def test_a_leave_without_its_enter_changes_nothing(clock):
    startup.leave("compiles")
    with startup.phase("graphs"):
        clock(1.0)
        startup.leave("compiles")  # a hook that fired alone
        clock(1.0)
    assert startup.seconds() == {"graphs": 2.0}


def test_an_unknown_phase_is_a_programming_error(clock):
    with pytest.raises(ValueError, match="unknown start-up phase 'warm-up'"):
        startup.enter("warm-up")


def test_nothing_timed_says_so(clock):
    assert startup.summary() == "start-up phases (s): none timed"


def test_seconds_since_the_command_count_the_interpreter_start():
    code = (
        "import time; time.sleep(0.5); from edgereason.util.startup import since_command; "
        "print(since_command())"
    )
    began = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0.5 <= float(out.stdout) <= time.time() - began + 0.02  # create_time: 10 ms ticks
