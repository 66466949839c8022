"""The chat app end to end with the real SmolLM2: a search shows up in the tree and the chat, Esc
cancels and the app takes the next problem, Ctrl+C cancels too and quits once no search runs (or
pressed again while the cancel waits for a step), Ctrl+Q leaves no engine thread behind."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Markdown, Static

from edgereason.config import SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import Policy
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings
from edgereason.ui.app import INTERRUPTED, ChatApp
from edgereason.ui.history import History
from edgereason.ui.runner import SearchRunner
from edgereason.ui.widgets.chat_log import ChatLog
from edgereason.ui.widgets.status_bar import StatusBar
from edgereason.ui.widgets.tree_view import SearchTree

pytestmark = pytest.mark.slow

# threads=1: the test machine may be shared; llama.cpp's spinning threads stall badly when
# oversubscribed
SETTINGS = ModelSettings(
    model="smollm2-135m", generator_kv_tokens=4096, verifier_kv_tokens=4096, threads=1
)
CONFIG = SearchConfig(beams=2, width=2, max_steps=2, max_step_tokens=24)
TIMEOUT_S = 60.0


@pytest.fixture
def app(tmp_path, smollm2_path) -> ChatApp:
    return ChatApp(
        lambda progress: open_session(SETTINGS, progress=progress),
        SETTINGS,
        CONFIG,
        Policy(),
        History(tmp_path / "history.jsonl"),
    )


async def wait_for(pilot: Pilot, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


async def ask(pilot: Pilot, problem: str) -> None:
    pilot.app.query_one(Input).value = problem
    await pilot.press("enter")


def engine_threads() -> list[int]:
    """Threads whose stack is inside the worker loop, whatever pool they belong to."""
    code = SearchRunner.run.__code__
    busy = []
    for ident, frame in sys._current_frames().items():
        f = frame
        while f is not None and f.f_code is not code:
            f = f.f_back
        if f is not None:
            busy.append(ident)
    return busy


async def test_problem_grows_scored_tree_and_answer(app: ChatApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ask(pilot, "What is 2 + 3?")
        await wait_for(
            pilot, lambda: app.state is not None and app.state.result is not None, "the answer"
        )
        await pilot.pause(0.2)
        tree = app.query_one(SearchTree)
        labels = [str(line.label) for line in tree._lines.values()]
        assert labels, "no step lines in the tree"
        assert any(n.score is not None for n in app.state.nodes.values())
        # "✔ 0.83 text"
        assert any(any(ch.isdigit() for ch in label.split()[1]) for label in labels), labels
        answers = app.query_one(ChatLog).query(Markdown)
        assert len(answers) == 1 and "tokens in" in answers.first().source
        assert "What is 2 + 3?" in str(app.query_one(ChatLog).query(Static).first().render())
        # the request's totals, and its KV freed: the last figures during the search said it was
        # held
        assert "tok/s" in str(app.query_one(StatusBar).render())
        assert "KV gen 0.0k/" in str(app.query_one(StatusBar).render())
        assert (
            app.query_one(StatusBar).progress.generated_tokens
            == app.state.result.metrics.generated_tokens
        )
        assert [e.problem for e in app.history.load()] == ["What is 2 + 3?"]


async def test_escape_cancels_and_app_takes_next_problem(app: ChatApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(
            pilot, lambda: app.state is not None and len(app.state.nodes) > 1, "the first steps"
        )
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.searching, "the cancellation")
        assert app.state.result.status == "cancelled"
        assert "search cancelled" in str(app.query_one(ChatLog).query(Static).last().render())
        await ask(pilot, "What is 4 + 4?")
        assert app.searching and app.state.question == "What is 4 + 4?"
        await wait_for(pilot, lambda: len(app.state.nodes) > 1, "the second search to start")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.searching, "the second cancellation")
        assert [e.status for e in app.history.load()] == ["cancelled", "cancelled"]


async def test_ctrl_c_cancels_a_running_search_and_quits_once_none_runs(app: ChatApp) -> None:
    """Ctrl+C showed a pop-up asking for Ctrl+Q while the search ran on."""
    async with app.run_test(size=(160, 48)) as pilot:
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(
            pilot, lambda: app.state is not None and len(app.state.nodes) > 1, "the first steps"
        )
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.searching, "the cancellation")
        assert app.state.result.status == "cancelled" and app.is_running
        assert "search cancelled" in str(app.query_one(ChatLog).query(Static).last().render())
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, "the quit")
    assert app.return_code == INTERRUPTED and app.runner.finished.is_set() and not engine_threads()


async def test_a_second_ctrl_c_quits_while_the_cancel_waits_for_a_long_step(
    app: ChatApp, monkeypatch
) -> None:
    """Two fast Ctrl+C only cancelled the search where an engine step takes long (a large model on
    one thread): the second came before the search had ended and cancelled it again, and the chat
    ran on. Each step here takes 0.5 s more than SmolLM2's, as on such a device."""
    step = Engine.step

    def long_step(engine: Engine) -> None:
        time.sleep(0.5)
        step(engine)

    monkeypatch.setattr(Engine, "step", long_step)
    async with app.run_test(size=(160, 48)) as pilot:
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(
            pilot, lambda: app.state is not None and len(app.state.nodes) > 1, "the first steps"
        )
        await pilot.press("ctrl+c", "ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, "the quit")
    assert app.return_code == INTERRUPTED and app.runner.finished.is_set() and not engine_threads()


async def test_a_cancelled_search_leaves_no_kv_figures_in_the_status_bar(app: ChatApp) -> None:
    """The bar kept the cancelled search's KV in use ("KV gen 0.6k/4.1k ...") after the engine had
    freed it."""
    async with app.run_test(size=(160, 48)) as pilot:
        bar = app.query_one(StatusBar)
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(pilot, lambda: "KV gen" in str(bar.render()), "the first KV figures")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.searching, "the cancellation")
        await pilot.pause(0.2)
        assert app.state.result.status == "cancelled"
        assert str(bar.render()) == f"ready  {app._models_line()}  {app._search_line()}"


async def test_esc_leaves_the_cancelled_tree_on_screen(app: ChatApp) -> None:
    """The cancel prunes every step (rule "cancelled"); the tree hid them all as pruned and went
    blank: what was cancelled stays, marked as cancelled, not struck out as judged worse."""
    async with app.run_test(size=(160, 48)) as pilot:
        tree = app.query_one(SearchTree)
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(pilot, lambda: len(tree._lines) >= 2, "the first steps in the tree")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.searching, "the cancellation")
        await pilot.pause(0.2)
        cancelled = [n for n in app.state.nodes.values() if n.prune_rule == "cancelled"]
        assert cancelled and {n.id for n in cancelled if n.parent is not None} <= set(tree._lines)
        labels = [str(tree._lines[n.id].label) for n in cancelled if n.id in tree._lines]
        assert labels and all(label.startswith("■ ") for label in labels), labels


async def test_ctrl_q_mid_search_leaves_no_engine_thread(app: ChatApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ask(pilot, "Count from 1 to 100, one number per step.")
        await wait_for(
            pilot, lambda: app.state is not None and len(app.state.nodes) > 1, "the search to start"
        )
        await pilot.press("ctrl+q")
        deadline = time.monotonic() + TIMEOUT_S
        # only ctrl+q stops the worker while the app still runs
        while not app.runner.finished.is_set():
            assert time.monotonic() < deadline, "ctrl+q did not stop the worker"
            await asyncio.sleep(0.05)
    assert app.return_code == 0
    assert not engine_threads()
    assert (
        app.worker is not None
        and app.worker.is_finished
        and all(w.is_finished for w in app.workers)
    )


async def notes_once_ready(settings: ModelSettings, history: History) -> list[str]:
    """The chat log's notes once the models have loaded."""
    app = ChatApp(
        lambda progress: open_session(settings, progress=progress),
        settings,
        CONFIG,
        Policy(),
        history,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.query_one(StatusBar).phase == "ready", "the models")
        await pilot.pause(0.1)
        return [str(note.render()) for note in app.query_one(ChatLog).query(".note")]


async def test_the_profile_tip_reaches_the_chat_log_once(tmp_path, smollm2_path, monkeypatch):
    """The session opens in the worker while the app holds stderr: a line printed there was lost,
    yet remembered as shown. The chat log shows the session's start notes instead."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    settings = dataclasses.replace(SETTINGS, model=str(smollm2_path))
    history = History(tmp_path / "history.jsonl")
    first = await notes_once_ready(settings, history)
    assert any("no memory profile for this device and models" in n for n in first), first
    assert not any("no memory profile" in n for n in await notes_once_ready(settings, history))
