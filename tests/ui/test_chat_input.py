"""The chat app on the fake backend (tests/fakes.py): what the user types, pastes or gets back
reaches the screen whole, and only as text."""

from __future__ import annotations

import threading
from pathlib import Path

from fakes import FakeGenerator, FakeVerifier
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input

from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.session.opening import Session
from edgereason.session.settings import ModelSettings
from edgereason.ui.app import ChatApp
from edgereason.ui.history import History, HistoryEntry
from tests.util.test_terminal import C0, C1, SEQUENCES

TINY = SearchConfig(beams=2, width=2, max_steps=1, max_step_tokens=4)


def fake_app(
    tmp_path: Path, generator: FakeGenerator | None = None, loaded: threading.Event | None = None
) -> ChatApp:
    """loaded: the models load once it is set (at once without it)."""

    def session(progress) -> Session:
        if loaded is not None:
            loaded.wait(timeout=10)
        return Session(
            ModelSettings(), generator or FakeGenerator(), FakeVerifier(), Path("gen"), Path("prm")
        )

    return ChatApp(
        session, ModelSettings(model="fake"), TINY, Policy(), History(tmp_path / "history.jsonl")
    )


async def until_ready(pilot: Pilot) -> None:
    while pilot.app.query_one("StatusBar").phase != "ready":
        await pilot.pause(0.02)


async def ask(pilot: Pilot, problem: str) -> None:
    pilot.app.query_one(Input).value = problem
    await pilot.press("enter")


async def test_a_problem_pasted_over_several_lines_is_kept_whole(tmp_path) -> None:
    """Textual's Input kept the first line of a paste: the rest of a pasted word problem was dropped
    unseen."""
    app = fake_app(tmp_path)
    async with app.run_test() as pilot:
        await until_ready(pilot)
        field = app.query_one(Input)
        field.value = "Q: "
        app.post_message(
            events.Paste("Janet has 3 ducks.\r\n\n  Each lays 2 eggs.\nHow many eggs?\n")
        )
        await pilot.pause()
        assert field.value == "Q: Janet has 3 ducks. Each lays 2 eggs. How many eggs?"
        await pilot.press("ctrl+q")


async def test_a_refused_problem_goes_back_into_the_input(tmp_path) -> None:
    """A problem the generator cannot hold was refused with 'shorten the problem', and was gone from
    the input."""
    app = fake_app(tmp_path, FakeGenerator(capacity=20))
    async with app.run_test() as pilot:
        await until_ready(pilot)
        await ask(pilot, "What is 2 + 2? " * 40)
        while app.searching:
            await pilot.pause(0.02)
        assert "shorten the problem" in str(app.query("ChatLog .error").last().render())
        assert app.query_one(Input).value == ("What is 2 + 2? " * 40).strip()
        assert app.query_one("StatusBar").phase == "ready"
        await pilot.press("ctrl+q")


async def test_a_problem_of_zero_width_characters_alone_is_refused_with_one_line(tmp_path) -> None:
    """Zero-width spaces (pasted from a web page) passed the check for an empty problem: the search
    ran on a problem the chat showed as blank."""
    app = fake_app(tmp_path)
    async with app.run_test() as pilot:
        await until_ready(pilot)
        await ask(pilot, "\u200b\u2060 \ufeff\u200b")
        assert not app.searching and app.state is None
        note = str(app.query("ChatLog .error").last().render())
        assert note == (
            "the problem has no visible characters (only zero-width or other invisible ones); "
            "type the problem's text"
        )
        await ask(pilot, "What is 2 + 2?\u200b")  # beside visible text one is no matter
        assert app.state is not None and app.state.question == "What is 2 + 2?\u200b"
        await pilot.press("ctrl+q")


async def test_what_was_typed_during_a_refused_search_stays(tmp_path) -> None:
    loaded = threading.Event()
    app = fake_app(tmp_path, FakeGenerator(capacity=20), loaded)
    async with app.run_test() as pilot:
        await ask(pilot, "What is 2 + 2?")  # while the models load: refused once they are
        app.query_one(Input).value = "What is 3 + 3?"
        loaded.set()
        while app.searching:
            await pilot.pause(0.02)
        assert app.query("ChatLog .error")
        assert app.query_one(Input).value == "What is 3 + 3?"
        await pilot.press("ctrl+q")


class EscapingGenerator(FakeGenerator):
    """Every letter comes with escape sequences that clear the screen and set the terminal's title:
    a model can generate ESC (it is one of a byte-level vocabulary's tokens)."""

    def token_piece(self, token: int) -> bytes:
        piece = super().token_piece(token)
        return b"\x1b[2J\x1b]0;PWNED\x07" + piece if token > 1 else piece


def escapes_on_screen(app: ChatApp) -> bool:
    return "\x1b" in app.export_screenshot()


EVIL = "".join(C0 + C1) + "".join(SEQUENCES) + "[bold]markup[/bold]"


class AllControlsGenerator(FakeGenerator):
    """Every letter comes with every C0 and C1 control character, the common escape sequences and
    Rich markup."""

    def token_piece(self, token: int) -> bytes:
        piece = super().token_piece(token)
        return EVIL.encode() + piece if token > 1 else piece


async def test_every_control_character_the_model_generates_is_shown_as_text(tmp_path) -> None:
    """The printing boundary's test for the chat: the tree, the path, the answer and a note hold the
    model's text; none of its control characters reaches the screen raw, and its markup is text."""
    app = fake_app(tmp_path, AllControlsGenerator())
    async with app.run_test(size=(200, 60)) as pilot:
        await until_ready(pilot)
        await ask(pilot, f"What is 2 + 2? {EVIL}")
        await until_idle(pilot)
        app.query_one("ChatLog").add_note(f"the search failed: {EVIL}", error=True)
        await pilot.pause()
        shown = app.export_screenshot()
        assert not {c for c in shown if c in C0 + C1 + ["\u202e"]}
        assert "\\x1b]0;owned\\x07" in shown and "[bold]markup[/bold]" in shown.replace(
            "&#160;", " "
        )
        await pilot.press("ctrl+q")


async def test_escape_sequences_the_model_generates_are_shown_not_sent(tmp_path) -> None:
    app = fake_app(tmp_path, EscapingGenerator())
    async with app.run_test(size=(160, 48)) as pilot:
        await until_ready(pilot)
        await ask(pilot, "What is 2 + 2?")
        while app.searching:
            await pilot.pause(0.02)
        await pilot.pause()
        assert "\x1b" in app.history.load()[0].steps[0]  # the model's text, kept as it came
        shown = app.export_screenshot()
        assert "\\x1b[2J\\x1b]0;PWNED\\x07" in shown and not escapes_on_screen(app)
        await pilot.press("ctrl+q")


async def test_escape_sequences_in_the_history_are_shown_not_sent(tmp_path) -> None:
    app = fake_app(tmp_path)
    app.history.append(
        HistoryEntry(
            "2025-01-01 00:00:00",
            "What is 2 + 2?\x1b]0;PWNED\x07\x1b[2J",
            "4\x1b[5m",
            "done",
            0.5,
            ["2 + 2 = 4\x9b31m"],
            "m",
            "edge",
            2,
            2,
        )
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await until_ready(pilot)
        await pilot.press("f3")
        await pilot.pause()
        assert "PWNED" in app.export_screenshot() and not escapes_on_screen(app)
        await pilot.press("enter")
        assert app.query_one(Input).value == "What is 2 + 2?\\x1b]0;PWNED\\x07\\x1b[2J"
        assert not escapes_on_screen(app)
        await pilot.press("ctrl+q")


async def until_idle(pilot: Pilot, timeout_s: float = 10.0) -> None:
    """Until the search ends; a search that never ends fails the test instead of hanging it."""
    for _ in range(int(timeout_s / 0.02)):
        if not pilot.app.searching:
            return
        await pilot.pause(0.02)
    raise AssertionError(f"still searching after {timeout_s} s")


class BrokenTokenizer(FakeGenerator):
    def tokenize(self, text: str, special: bool = True) -> list[int]:
        if "break" in text:
            raise RuntimeError("tokenizer bug")
        return super().tokenize(text, special)


async def test_a_search_that_cannot_start_leaves_the_chat_usable(tmp_path) -> None:
    """An error other than the engine's own refusals ended the worker thread in silence: the status
    bar said 'searching' for good and no later problem was ever solved."""
    app = fake_app(tmp_path, BrokenTokenizer())
    async with app.run_test() as pilot:
        await until_ready(pilot)
        await ask(pilot, "please break")
        await until_idle(pilot)
        assert "the search could not start: RuntimeError('tokenizer bug')" in str(
            app.query("ChatLog .error").last().render()
        )
        assert app.query_one("StatusBar").phase == "ready"
        app.query_one(Input).value = ""
        await ask(pilot, "What is 2 + 2?")
        await until_idle(pilot)
        assert app.state is not None and app.state.result is not None
        await pilot.press("ctrl+q")
