"""The chat UI without a model: event throttling, the UI-side tree and its widget, history."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.selection import Selection as TextSelection
from textual.widgets import Input, Markdown, Static
from textual.widgets.input import Selection
from textual.widgets.markdown import MarkdownBlock

from edgereason.config import SearchConfig
from edgereason.engine.events import (
    NodeAdded,
    NodeExtended,
    NodeScored,
    NodeSelected,
    NodeStatus,
    Progress,
    RequestDone,
    StepFinished,
)
from edgereason.engine.policy import Policy
from edgereason.engine.result import FinalPath, RequestMetrics, SearchResult
from edgereason.errors import ModelError
from edgereason.session.opening import Session
from edgereason.session.settings import ModelSettings
from edgereason.ui.app import INTERRUPTED, ChatApp
from edgereason.ui.history import History, HistoryEntry
from edgereason.ui.messages import EngineEvent
from edgereason.ui.relay import EventRelay
from edgereason.ui.screens import HelpScreen, HistoryScreen
from edgereason.ui.state import SearchState
from edgereason.ui.widgets.chat_log import ChatLog
from edgereason.ui.widgets.status_bar import StatusBar
from edgereason.ui.widgets.tree_view import SearchTree


def test_relay_holds_token_events_and_flushes_before_step_events() -> None:
    now = [0.0]
    sent: list = []
    relay = EventRelay(sent.append, interval=0.1, clock=lambda: now[0])
    relay(NodeExtended("r", 1, "a", 1))  # first one goes out: nothing was sent for a whole interval
    for i, text in enumerate(["ab", "abc", "abcd"], start=2):
        now[0] += 0.01
        relay(NodeExtended("r", 1, text, i))
    relay(Progress("r", 4, 0.04, 0, 1, 2, 3, 4, 0))
    assert [e.text for e in sent] == ["a"]  # the rest is held: latest text wins
    relay(StepFinished("r", 1, "step"))
    assert [type(e).__name__ for e in sent] == [
        "NodeExtended",
        "NodeExtended",
        "Progress",
        "StepFinished",
    ]
    assert sent[1].text == "abcd"
    now[0] += 0.2
    relay(NodeExtended("r", 2, "x", 1))
    assert sent[-1] == NodeExtended("r", 2, "x", 1)


def test_state_mirrors_node_status_events() -> None:
    state = SearchState("q")
    state.apply(NodeAdded("r", 0, None, 0, 2, False))
    assert state.apply(NodeAdded("r", 1, 0, 1, 1, False)) == [1]
    state.apply(NodeAdded("r", 2, 0, 1, 1, False))
    # text does not touch the tree line
    assert state.apply(NodeExtended("r", 1, "step one", 2)) == []
    assert state.latest == 1
    state.apply(StepFinished("r", 1, "step"))
    state.apply(NodeStatus("r", 1, "waiting"))
    assert state.nodes[1].status == "waiting" and state.nodes[1].finish == "step"
    state.apply(NodeScored("r", 1, 0.9))
    state.apply(NodeStatus("r", 1, "verified"))
    state.apply(NodeScored("r", 2, 0.2))
    assert state.nodes[1].status == "verified" and state.best_path() == {1}
    assert state.apply(NodeSelected("r", 1, 1)) == []  # the status event says what selection did
    state.apply(NodeStatus("r", 1, "selected"))
    state.apply(NodeStatus("r", 2, "pruned", "selection"))
    state.apply(NodeAdded("r", 3, 1, 2, 1, True))
    assert state.nodes[3].status == "speculative" and state.nodes[1].children == [3]
    state.apply(NodeStatus("r", 3, "generating"))
    assert [n.status for n in state.nodes.values()] == [
        "prefill",
        "selected",
        "pruned",
        "generating",
    ]
    assert state.nodes[2].prune_rule == "selection"
    state.apply(StepFinished("r", 3, "answer"))
    state.apply(NodeScored("r", 3, 0.7))
    state.apply(NodeStatus("r", 3, "complete"))
    assert state.nodes[3].status == "complete"
    assert [n.id for n in state.path(3)] == [1, 3] and state.best_path() == {1, 3}


def test_history_round_trip_skips_broken_lines(tmp_path) -> None:
    history = History(tmp_path / "sub" / "history.jsonl")
    assert history.load() == []
    entry = HistoryEntry(
        "t", "What is 2+3?", "5", "done", 0.9, ["2+3=5"], "m", "baseline", 2, 2, 10, 1.0
    )
    history.append(entry)
    with history.path.open("a") as f:
        f.write("{not json\n")
    history.append(HistoryEntry("t2", "Q2", None, "cancelled"))
    assert [e.problem for e in history.load()] == ["What is 2+3?", "Q2"]
    assert history.load()[0] == entry


class TreeApp(App[None]):
    def compose(self):
        yield SearchTree()


async def test_tree_hides_pruned_until_toggled_and_marks_best_path() -> None:
    state = SearchState("q")
    events = [
        NodeAdded("r", 0, None, 0, 2, False),
        NodeAdded("r", 1, 0, 1, 1, False),
        NodeAdded("r", 2, 0, 1, 1, False),
        NodeAdded("r", 3, 2, 2, 1, False),
    ]
    async with TreeApp().run_test() as pilot:
        tree = pilot.app.query_one(SearchTree)
        tree.reset(state)
        for event in events + [
            StepFinished("r", 1, "step"),
            NodeScored("r", 1, 0.9),
            NodeStatus("r", 1, "verified"),
            NodeScored("r", 2, 0.1),
        ]:
            tree.update_nodes(state.apply(event))
        assert set(tree._lines) == {1, 2, 3}
        assert str(tree._lines[1].label).startswith("◆ 0.90")
        assert "on #1f3a2a" in str(tree._lines[1].label.spans)  # best path band
        for event in [
            NodeStatus("r", 2, "pruned", "selection"),
            NodeStatus("r", 3, "pruned", "selection"),
        ]:
            tree.update_nodes(state.apply(event))
        assert set(tree._lines) == {1}
        tree.toggle_pruned()
        assert set(tree._lines) == {1, 2, 3} and str(tree._lines[3].label).startswith("✗")
        tree.toggle_pruned()
        assert set(tree._lines) == {1}


async def test_app_survives_models_that_do_not_load(tmp_path) -> None:
    def broken(progress) -> Session:
        raise ModelError("no such model")

    app = ChatApp(
        broken, ModelSettings(model="nope"), SearchConfig(), Policy(), History(tmp_path / "h.jsonl")
    )
    async with app.run_test() as pilot:
        while app.failed is None:
            await pilot.pause(0.02)
        assert "no such model" in app.failed
        assert app.query_one(StatusBar).phase == "models failed to load"
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        app.query_one(Input).value = "What is 1 + 1?"
        await pilot.press("enter")
        assert not app.searching
        await pilot.press("ctrl+q")
    assert app.return_code == 0 and app.runner.finished.is_set()


async def test_p_shows_pruned_branches_with_the_tree_focused_only(tmp_path) -> None:
    """The help says "p (tree focused) or F2"; p in the chat pane showed and hid them as well."""

    def broken(progress) -> Session:
        raise ModelError("no such model")

    app = ChatApp(
        broken, ModelSettings(model="nope"), SearchConfig(), Policy(), History(tmp_path / "h.jsonl")
    )
    async with app.run_test() as pilot:
        tree = app.query_one(SearchTree)
        app.query_one(ChatLog).focus()
        await pilot.press("p")
        assert not tree.show_pruned
        await pilot.press("f2")
        assert tree.show_pruned
        tree.focus()
        await pilot.press("p")
        assert not tree.show_pruned
        await pilot.press("ctrl+q")


async def test_h_opens_the_history_with_the_tree_focused_only(tmp_path) -> None:
    """The help says "h (tree focused) or F3"; h in the chat pane opened the history as well."""

    def broken(progress) -> Session:
        raise ModelError("no such model")

    app = ChatApp(
        broken, ModelSettings(model="nope"), SearchConfig(), Policy(), History(tmp_path / "h.jsonl")
    )
    async with app.run_test() as pilot:
        app.query_one(ChatLog).focus()
        await pilot.press("h")
        assert not isinstance(app.screen, HistoryScreen)
        await pilot.press("f3")
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HistoryScreen)
        app.query_one(SearchTree).focus()
        await pilot.press("h")
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("escape")
        await pilot.press("ctrl+q")


def idle_app(tmp_path) -> ChatApp:
    """A chat whose models did not load: no search can run, so it stays idle."""

    def broken(progress) -> Session:
        raise ModelError("no such model")

    return ChatApp(
        broken, ModelSettings(model="nope"), SearchConfig(), Policy(), History(tmp_path / "h.jsonl")
    )


@pytest.mark.parametrize("screen", [None, "f1", "f3"])
async def test_ctrl_c_with_no_search_running_quits_with_its_exit_code(tmp_path, screen) -> None:
    """Textual's Ctrl+C showed a pop-up asking for Ctrl+Q, and the chat ran on; the README says
    Ctrl-C exits 130 at any moment. Over the help and the history too."""
    app = idle_app(tmp_path)
    async with app.run_test() as pilot:
        while app.failed is None:
            await pilot.pause(0.02)
        if screen:
            await pilot.press(screen)
            assert isinstance(app.screen, {"f1": HelpScreen, "f3": HistoryScreen}[screen])
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert not app.is_running, "Ctrl+C did not quit"
    assert app.return_code == INTERRUPTED == 130 and app.runner.finished.is_set()


async def test_ctrl_c_copies_selected_text_and_the_chat_goes_on(tmp_path) -> None:
    """Where text is selected, Ctrl+C is Textual's copy still, in the input and over the help:
    cancelling or quitting then would lose what was selected."""
    app = idle_app(tmp_path)
    async with app.run_test() as pilot:
        field = app.query_one(Input)
        field.value = "What is 1 + 1?"
        field.selection = Selection(0, 7)
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert app.clipboard == "What is" and app.is_running
        await pilot.press("f1")
        title = app.screen.query_one(Markdown).query(MarkdownBlock).first()  # "# edgereason chat"
        # all of it, as a mouse drag selects
        app.screen.selections = {title: TextSelection(None, None)}
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert app.clipboard == "edgereason chat" and app.is_running
        await pilot.press("ctrl+q")
    assert app.return_code == 0


class BarApp(App[None]):
    def compose(self):
        yield StatusBar(
            "gen qwen2.5-coder-0.5b · prm qwen2.5-coder-1.5b", "auto · beam beams 8 width 4"
        )


async def test_status_bar_keeps_live_counters_when_narrow() -> None:
    """The models and search go before tokens a second and each model's KV: at 80 columns the KV
    used to be cut."""
    progress = Progress("r", 6000, 3.0, 12, 1200, 16000, 400, 8000, 35)
    async with BarApp().run_test(size=(160, 5)) as pilot:
        bar = pilot.app.query_one(StatusBar)
        bar.set_phase("searching")
        bar.set_progress(progress)
        wide = str(bar.render())
        assert wide == (
            "searching  gen qwen2.5-coder-0.5b · prm qwen2.5-coder-1.5b  auto · beam beams 8 width "
            "4  2000 tok/s  PRM 12  KV gen 1.2k/16k prm 0.4k/8k  spec reused 35"
        )
        await pilot.resize_terminal(80, 5)
        await pilot.pause()
        narrow = str(bar.render())
        assert (
            narrow == "searching  2000 tok/s  PRM 12  KV gen 1.2k/16k prm 0.4k/8k"
            and len(narrow) <= 78
        )
        bar.set_progress(None)  # idle: the models and search fit again
        assert str(bar.render()) == "searching  gen qwen2.5-coder-0.5b · prm qwen2.5-coder-1.5b"


async def test_status_bar_shows_a_kv_capacity_under_a_thousand_tokens() -> None:
    """--kv-tokens 256 read "KV gen 0.3k/0k": more used than there was."""
    async with BarApp().run_test(size=(160, 5)) as pilot:
        bar = pilot.app.query_one(StatusBar)
        bar.set_progress(Progress("r", 60, 3.0, 1, 250, 256, 40, 512, 0))
        assert "KV gen 0.2k/0.3k prm 0.0k/0.5k" in str(bar.render())


async def test_start_up_notes_show_in_the_chat_log(tmp_path) -> None:
    """chat's command line cannot print past the screen switch: a note from it (a flag the search
    does not use) shows in the chat log."""

    def broken(progress) -> Session:
        raise ModelError("no such model")

    note = "note: best-of-n ran, which has no use for --width"
    app = ChatApp(
        broken,
        ModelSettings(model="nope"),
        SearchConfig(),
        Policy(),
        History(tmp_path / "h.jsonl"),
        notes=(note,),
    )
    async with app.run_test() as pilot:
        shown = [str(w.render()) for w in app.query_one(ChatLog).query(".note")]
        assert shown[:1] == [note]
        await pilot.press("ctrl+q")


def test_search_line_names_a_width_only_where_the_strategy_has_one(tmp_path) -> None:
    def line(**search) -> str:
        return ChatApp(
            None,
            ModelSettings(model="m"),
            SearchConfig(**search),
            Policy(),
            History(tmp_path / "h.jsonl"),
        )._search_line()

    assert line(strategy="best-of-n", beams=8).endswith("best-of-n beams 8")
    assert line(strategy="beam", beams=8, width=4).endswith("beam beams 8 width 4")


class HistoryApp(App[None]):
    def on_mount(self) -> None:
        self.push_screen(
            HistoryScreen([HistoryEntry("2025-01-01 00:00:00", "What is 2 + 2?", "4", "done")])
        )


async def test_history_survives_a_very_narrow_terminal() -> None:
    """Under 18 columns the history list had no column left for its text: Rich's wrapping raised
    ValueError."""
    app = HistoryApp()
    async with app.run_test(size=(80, 24)) as pilot:
        for width in (40, 17, 10, 1, 80):
            await pilot.resize_terminal(width, 10)
            await pilot.pause()
            assert isinstance(app.screen, HistoryScreen) and app.is_running
        await pilot.press("escape")
        assert not isinstance(app.screen, HistoryScreen)


async def test_model_text_nested_too_deep_shows_as_written_in_the_chat(tmp_path) -> None:
    """500 nested `\\frac{` (some 1,000 tokens, inside one default step) ended the chat in
    Textual's traceback: the tree, the path, the answer and the history show it as written."""
    deep = "\\frac{" * 500 + "1" + "}{2}" * 500
    step = f"So $\\boxed{{{deep}}}$"
    result = SearchResult(
        "r", "q", deep, [FinalPath([(step, 0.9)], 0.9, deep, 1)], [], RequestMetrics()
    )
    app = idle_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.failed is None:  # no models: the search's events come from this test
            await pilot.pause(0.02)
        app.state, app.searching = SearchState("q"), True  # as a problem typed in sets them
        app.query_one(SearchTree).reset(app.state)
        for event in [
            NodeAdded("r", 0, None, 0, 1, False),  # the prompt
            NodeAdded("r", 1, 0, 1, 1, False),
            NodeExtended("r", 1, step, 1000),
            StepFinished("r", 1, "answer"),
            RequestDone("r", result),
        ]:
            app.post_message(EngineEvent(event))
        for _ in range(500):  # ten seconds at most
            if not (app.searching and app.is_running):  # done, or ended in a traceback
                break
            await pilot.pause(0.02)
        assert app.is_running and not app.searching
        assert "\\frac{\\frac{" in str(app.query_one(SearchTree)._lines[1].label)
        assert step in str(app.query_one("#detail-text", Static).render())
        assert deep in app.query_one(ChatLog).query(Markdown).last().source
        await pilot.press("f3")
        assert isinstance(app.screen, HistoryScreen)
        await pilot.pause(0.1)
        assert deep in app.screen.query_one("#history-entry", Markdown).source
        await pilot.press("escape")
        await pilot.press("ctrl+q")
    assert app.return_code == 0
