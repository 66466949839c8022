"""The chat app on the fake backend (tests/fakes.py): what the user types, pastes or gets back reaches the screen
whole, and only as text."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.pilot import Pilot
from textual.widgets import Input

from fakes import FakeGenerator, FakeVerifier

from edgereason.config import SearchConfig
from edgereason.policy import Policy
from edgereason.session import ModelSettings, Session
from edgereason.ui.app import ChatApp
from edgereason.ui.history import History

TINY = SearchConfig(beams=2, width=2, max_steps=1, max_step_tokens=4)


def fake_app(tmp_path: Path, generator: FakeGenerator | None = None) -> ChatApp:
    def session(progress) -> Session:
        return Session(ModelSettings(), generator or FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm"))

    return ChatApp(session, ModelSettings(model="fake"), TINY, Policy(), History(tmp_path / "history.jsonl"))


async def until_ready(pilot: Pilot) -> None:
    while pilot.app.query_one("StatusBar").phase != "ready":
        await pilot.pause(0.02)


async def test_a_problem_pasted_over_several_lines_is_kept_whole(tmp_path) -> None:
    """Textual's Input kept the first line of a paste: the rest of a pasted word problem was dropped unseen."""
    app = fake_app(tmp_path)
    async with app.run_test() as pilot:
        await until_ready(pilot)
        field = app.query_one(Input)
        field.value = "Q: "
        app.post_message(events.Paste("Janet has 3 ducks.\r\n\n  Each lays 2 eggs.\nHow many eggs?\n"))
        await pilot.pause()
        assert field.value == "Q: Janet has 3 ducks. Each lays 2 eggs. How many eggs?"
        await pilot.press("ctrl+q")
