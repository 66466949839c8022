"""Progress on stderr: solve's status line on a terminal (what the engine's events make of it), and the bars of
bench, train-prm and a model pull, which end their line before whatever is printed next."""

from __future__ import annotations

import io

from edgereason.cli import models_cmd
from edgereason.cli.main import main
from edgereason.cli.progress import SearchProgress, bar, end_line
from edgereason.engine.events import Progress
from edgereason.errors import ConfigError


def test_the_status_line_is_drawn_at_most_every_so_often_and_clears_itself() -> None:
    stream = io.StringIO()
    status = SearchProgress(paths=4, stream=stream, every_s=1.0)
    status(Progress("r", 120, 2.0, 1, 0, 0, 0, 0, 0, completed_paths=3))
    status(Progress("r", 130, 2.5, 1, 0, 0, 0, 0, 0, completed_paths=4))  # within every_s of the last line
    line = "searching: 120 tokens (60.0 tok/s), 3/4 paths done, 1 PRM calls, 2 s"
    assert stream.getvalue() == "\r" + line
    status.close()
    assert stream.getvalue().endswith("\r" + " " * len(line) + "\r")


def test_finished_paths_reach_the_status_line_from_a_real_search(smollm2) -> None:
    """SmolLM2 through the engine: the last line drawn counts every path the search finished."""
    from edgereason.backends.llamacpp import open_models
    from edgereason.config import SamplingParams, SearchConfig
    from edgereason.engine.loop import Engine

    gen, ver = open_models(smollm2.path, smollm2.path, "judge", 4096, 4096)
    stream = io.StringIO()
    config = SearchConfig(
        strategy="best-of-n",
        beams=3,
        max_steps=2,
        max_step_tokens=16,
        max_path_tokens=32,
        sampling=SamplingParams(temperature=0.8, seed=1),
    )
    try:
        Engine(gen, ver, on_event=SearchProgress(3, stream, every_s=0.0)).solve("What is 2 + 2?", config)
    finally:
        gen.close()
        ver.close()
    assert stream.getvalue().rsplit("\r", 1)[-1].split(", ")[1] == "3/3 paths done"


def test_an_error_after_a_progress_bar_starts_a_line_of_its_own(monkeypatch, capsys) -> None:
    """It was printed on the end of the bar: "features [####....] 2/2edgereason: error: ..."."""

    def fails_half_way(args) -> int:
        bar("features", width=4)(1, 2)
        raise ConfigError("the rollouts hold no steps")

    monkeypatch.setattr(models_cmd, "run_list", fails_half_way)
    assert main(["models", "list"]) == 2
    assert capsys.readouterr().err == "\rfeatures [##..] 1/2\nedgereason: error: the rollouts hold no steps\n"
    end_line()  # nothing is open any more: no newline
    assert capsys.readouterr().err == ""


def test_a_stop_after_a_progress_bar_ends_its_line_once(monkeypatch, capsys) -> None:
    def stopped_half_way(args) -> int:
        bar("rollouts", width=4)(1, 2)
        raise KeyboardInterrupt

    monkeypatch.setattr(models_cmd, "run_list", stopped_half_way)
    assert main(["models", "list"]) == 130
    assert capsys.readouterr().err == "\rrollouts [##..] 1/2\nedgereason: interrupted\n"  # no blank line
