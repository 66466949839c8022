"""Progress on stderr: solve's status line (what the engine's events make of it), and the bars of
bench, train-prm and a model pull, which end their line before whatever is printed next. A terminal
gets one line rewritten in place; a pipe or a file lines of their own, at most one every few
seconds, and no carriage returns."""

from __future__ import annotations

import io
import os
import pty
import re
import sys
from pathlib import Path

import pytest

from edgereason.cli import models_cmd, progress
from edgereason.cli.best_path import BestPath
from edgereason.cli.main import main
from edgereason.cli.progress import LOG_EVERY_S, SearchProgress, bar, duration, end_line
from edgereason.engine.events import (
    NodeAdded,
    NodeExtended,
    NodeScored,
    NodeStatus,
    Progress,
    StepFinished,
)
from edgereason.errors import ConfigError
from tests.bad_input.child_processes import wait_for_exit


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def stderr_is_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "is_terminal", lambda stream: stream is not None)


def progress_event(tokens: int, elapsed: float, done: int = 0, prm_calls: int = 1) -> Progress:
    return Progress("r", tokens, elapsed, prm_calls, 0, 0, 0, 0, 0, completed_paths=done)


def test_the_status_line_tells_the_time_and_clears_itself() -> None:
    stream = Terminal()
    status = SearchProgress(paths=4, stream=stream, every_s=1.0)
    status(progress_event(120, 2.0, done=0))
    status(progress_event(130, 2.5, done=0))  # within every_s of the last line
    line = "2 s · 0/4 paths · 120 tokens, 60.0 tok/s · 1 PRM calls"
    assert stream.getvalue() == "\r" + line
    status.close()
    assert stream.getvalue().endswith("\r" + " " * len(line) + "\r")


def test_a_finished_path_gives_an_estimate_of_what_is_left() -> None:
    """Paths of 100 tokens: 4 paths are about 400 tokens; 250 drawn at 50 tok/s leave about 3 s."""
    stream = Terminal()
    status = SearchProgress(paths=4, stream=stream, every_s=0.0)
    status(NodeAdded("r", 1, 0, 1, 1, False))
    status(NodeAdded("r", 2, 1, 2, 1, False))
    status(NodeExtended("r", 1, "first step", 60))
    status(NodeExtended("r", 2, "second step", 40))
    status(NodeStatus("r", 2, "complete"))
    status(progress_event(250, 5.0, done=1))
    assert stream.getvalue().rsplit("\r", 1)[-1].startswith("5 s, ~3 s left · 1/4 paths · ")


def test_a_log_gets_lines_not_carriage_returns_at_most_every_few_seconds(monkeypatch) -> None:
    now = [0.0]
    log = io.StringIO()
    monkeypatch.setattr(progress, "_line", progress.StatusLine(log, clock=lambda: now[0]))
    show = bar("rollouts", width=4, clock=lambda: now[0])
    for _ in range(40):  # 20 s before the first item is done, drawn every half second for the clock
        show(0, 10)
        now[0] += 0.5
    for done in range(1, 11):  # then one item a second
        show(done, 10)
        now[0] += 1.0
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and log.getvalue().endswith("\n")
    # the start, one line every LOG_EVERY_S (10 s), the first item done, the end
    assert [line.split("] ")[1] for line in lines] == [
        "0/10 · 0 s",
        "0/10 · 10 s",
        "1/10 · 20 s · ~3m 00s left",
        "10/10 · 29 s",
    ]
    assert LOG_EVERY_S == 10


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.4, 59, 61, 3599, 3725)] == [
        "0 s",
        "59 s",
        "1m 01s",
        "59m 59s",
        "1h 02m",
    ]


def test_finished_paths_and_the_estimate_reach_the_status_line_from_a_real_search(smollm2) -> None:
    """SmolLM2 through the engine: the last line drawn counts every path the search finished, and a
    line after the first finished path says how long is left."""
    from edgereason.backends import Placement, PRMSpec
    from edgereason.backends.llamacpp.backend import LlamaCppBackend
    from edgereason.config import SamplingParams, SearchConfig
    from edgereason.engine.loop import Engine

    judge = PRMSpec(smollm2.path, "judge")
    gen, ver = LlamaCppBackend().open_models(smollm2.path, judge, (4096, 4096), Placement())
    stream = Terminal()
    config = SearchConfig(
        strategy="best-of-n",
        beams=3,
        max_steps=2,
        max_step_tokens=16,
        max_path_tokens=32,
        sampling=SamplingParams(temperature=0.8, seed=1),
    )
    try:
        Engine(gen, ver, on_event=SearchProgress(3, stream, every_s=0.0)).solve(
            "What is 2 + 2?", config
        )
    finally:
        gen.close()
        ver.close()
    lines = stream.getvalue().split("\r")
    assert lines[-1].split(" · ")[1] == "3/3 paths"
    assert any(
        " left" in line or "finishing" in line
        for line in lines
        if "1/3 paths" in line or "2/3" in line
    )


def test_an_error_after_a_progress_bar_starts_a_line_of_its_own(
    monkeypatch, capsys, stderr_is_a_terminal
) -> None:
    """It was printed on the end of the bar: "features [####....] 2/2edgereason: error: ..."."""

    def fails_half_way(args) -> int:
        bar("features", width=4, clock=lambda: 0.0)(1, 2)
        raise ConfigError("the rollouts hold no steps")

    monkeypatch.setattr(models_cmd, "run_list", fails_half_way)
    assert main(["models", "list"]) == 2
    bar_line = "features [##..] 1/2 · 0 s · ~0 s left"
    assert (
        capsys.readouterr().err == f"\r{bar_line}\nedgereason: error: the rollouts hold no steps\n"
    )
    end_line()  # nothing is open any more: no newline
    assert capsys.readouterr().err == ""


def test_a_stop_after_a_progress_bar_ends_its_line_once(
    monkeypatch, capsys, stderr_is_a_terminal
) -> None:
    def stopped_half_way(args) -> int:
        bar("rollouts", width=4, clock=lambda: 0.0)(1, 2)
        raise KeyboardInterrupt

    monkeypatch.setattr(models_cmd, "run_list", stopped_half_way)
    assert main(["models", "list"]) == 130
    bar_line = "rollouts [##..] 1/2 · 0 s · ~0 s left"
    assert capsys.readouterr().err == f"\r{bar_line}\nedgereason: interrupted\n"  # no blank line


def test_before_a_path_finishes_the_step_and_token_budget_bound_what_is_left() -> None:
    """A step of 10 s out of 10 steps: at most 90 s left (the token budget, 4 x 1,000 tokens at
    20 tok/s, would allow 190 s)."""
    stream = Terminal()
    status = SearchProgress(4, stream, every_s=0.0, max_steps=10, max_path_tokens=1000)
    status(progress_event(120, 6.0))
    assert stream.getvalue().startswith("\r6 s, ≤ ~3m 14s left · 0/10 steps · 0/4 paths · ")
    status(NodeAdded("r", 0, None, 0, 4, False))
    status(NodeAdded("r", 1, 0, 1, 1, False))
    status(StepFinished("r", 1, "step"))
    status(progress_event(200, 10.0))
    assert stream.getvalue().rsplit("\r", 1)[-1].startswith("10 s, ≤ ~1m 30s left · 1/10 steps · ")


def test_a_terminal_shows_the_best_path_below_the_line_and_a_log_does_not() -> None:
    terminal, log = Terminal(), io.StringIO()
    for stream in (terminal, log):
        status = SearchProgress(2, stream, every_s=0.0)
        status.line.log_every_s = 0.0
        status(NodeAdded("r", 0, None, 0, 2, False))
        for node, text, score in ((1, "Janet has 16 eggs.", 0.9), (2, "She eats \x1b[2J 3.", 0.4)):
            status(NodeAdded("r", node, 0, 1, 1, False))
            status(NodeExtended("r", node, text, 6))
            status(NodeScored("r", node, score))
        status(progress_event(12, 1.0))
        status(NodeAdded("r", 3, 2, 2, 1, False))
        status(NodeExtended("r", 3, "So 13 are left.", 5))
        status(NodeScored("r", 3, 0.95))  # further along the weaker path: now the best
        status(progress_event(17, 2.0))
        status.close()
    drawn = terminal.getvalue()
    assert "\nbest 0.90: Janet has 16 eggs." in drawn
    assert (
        "\x1b[1A\r\x1b[J" in drawn and "\nbest 0.95: She eats \\x1b[2J 3. So 13 are left." in drawn
    )
    assert drawn.endswith("\x1b[1A\r\x1b[J")  # close() cleared both rows
    assert "best" not in log.getvalue() and len(log.getvalue().splitlines()) == 2


def test_a_long_best_path_shows_its_growing_end_within_the_width() -> None:
    best = BestPath()
    best(NodeAdded("r", 1, None, 1, 1, False))
    best(NodeExtended("r", 1, "word " * 40 + "the end", 200))
    best(NodeScored("r", 1, 0.5))
    line = best.line(40)
    assert len(line) == 40 and line.startswith("best 0.50: …") and line.endswith("the end")
    best(NodeStatus("r", 1, "pruned", "selection"))
    assert best.line(40) == ""


@pytest.mark.slow
def test_solve_on_a_terminal_shows_the_estimate_and_the_best_path_as_it_grows(smollm2_path):
    """A real solve in a pseudo-terminal: its stderr draws the budget's estimate before any path
    finishes, and the best path below the status line."""
    argv = ["solve", "What is 2 + 3?", "--model", str(smollm2_path), "--beams", "2"]
    argv += ["--width", "2", "--max-steps", "3", "--max-step-tokens", "24", "--threads", "2"]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        os.execv(sys.executable, [sys.executable, "-m", "edgereason", *argv])
    output = bytearray()
    assert wait_for_exit(pid, fd, output, timeout_s=300) == 0, bytes(output[-2000:])
    drawn = output.decode(errors="replace")
    assert re.search(r", ≤ ~[\dm ]+s left · \d/3 steps · 0/2 paths · ", drawn), drawn[-2000:]
    assert "\nbest " in drawn or "\r\nbest " in drawn
