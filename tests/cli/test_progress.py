"""Progress on stderr: solve's status line (what the engine's events make of it), and the bars of
bench, train-prm and a model pull, which end their line before whatever is printed next. A terminal
gets one line rewritten in place; a pipe or a file lines of their own, at most one every few
seconds, and no carriage returns."""

from __future__ import annotations

import io

import pytest

from edgereason.cli import models_cmd, progress
from edgereason.cli.main import main
from edgereason.cli.progress import LOG_EVERY_S, SearchProgress, bar, duration, end_line
from edgereason.engine.events import NodeAdded, NodeExtended, NodeStatus, Progress
from edgereason.errors import ConfigError


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
    line = "2 s · 120 tokens, 60.0 tok/s · 0/4 paths · 1 PRM calls"
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
    assert stream.getvalue().rsplit("\r", 1)[-1].endswith("1/4 paths · 1 PRM calls · ~3 s left")


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
    from edgereason.backends.llamacpp import open_models
    from edgereason.config import SamplingParams, SearchConfig
    from edgereason.engine.loop import Engine

    gen, ver = open_models(smollm2.path, smollm2.path, "judge", 4096, 4096)
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
    assert lines[-1].split(" · ")[2] == "3/3 paths"
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
