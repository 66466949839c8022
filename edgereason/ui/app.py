"""The chat app: input and chat on the left, the live search tree and the highlighted path on the
right.

The engine lives in one worker thread (SearchRunner); engine events arrive here as messages and are
applied to a SearchState, which the widgets render. Nothing on this side calls the engine."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Sequence

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Input, Tree
from textual.worker import Worker

from edgereason.config import SearchConfig
from edgereason.engine.events import NodeExtended, Progress, RequestDone
from edgereason.engine.policy import Policy
from edgereason.engine.result import SearchResult
from edgereason.models import display_name
from edgereason.session.settings import ModelSettings
from edgereason.ui.format import answer_markdown, settings_markdown
from edgereason.ui.history import History, HistoryEntry
from edgereason.ui.messages import EngineEvent, RunnerFailed, RunnerNote, RunnerStatus
from edgereason.ui.runner import SearchRunner, SessionFactory
from edgereason.ui.screens import HelpScreen, HistoryScreen
from edgereason.ui.state import SearchState
from edgereason.ui.widgets.chat_log import ChatLog
from edgereason.ui.widgets.detail import Detail
from edgereason.ui.widgets.problem_input import ProblemInput
from edgereason.ui.widgets.status_bar import StatusBar
from edgereason.ui.widgets.tree_view import SearchTree
from edgereason.util.text import blank_problem

# one engine step, or a model load in progress, has to end before the worker can
STOP_TIMEOUT_S = 30.0
# the app's return code when Ctrl+C quits it: the CLI exits 130, as on Ctrl-C
INTERRUPTED = 128 + signal.SIGINT


class ChatApp(App[None]):
    TITLE = "edgereason chat"
    CSS = """
    #main { height: 1fr; }
    ChatLog { width: 2fr; }
    #search { width: 3fr; }
    SearchTree { height: 3fr; }
    Detail { height: 2fr; }
    Input { dock: bottom; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel search"),
        # not a priority binding: where text is selected, the input's and the screen's Ctrl+C copy
        # it first
        Binding("ctrl+c", "interrupt", "Cancel / quit", show=False),
        Binding("f1", "help", "Help"),
        Binding("f2", "toggle_pruned", "Pruned"),
        Binding("f3", "history", "History"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        session_factory: SessionFactory,
        settings: ModelSettings,
        config: SearchConfig,
        policy: Policy,
        history: History | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.settings = settings
        self.notes = notes  # shown in the chat log at start: what the command line could not print
        self.config = config
        self.policy = policy
        self.history = history or History()
        self.runner = SearchRunner(session_factory, policy, self.post_message)
        self.worker: Worker[None] | None = None
        self.state: SearchState | None = None
        self.searching = False
        self.cancelling = False  # a cancel was asked for and the search has not ended yet
        self.failed: str | None = None  # set when the models did not load: nothing can be solved
        # quitting: the worker's last messages arrive while widgets go away; drop them
        self.closing = False

    # ------------------------------------------------------------------ layout and start-up
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChatLog()
            with Vertical(id="search"):
                yield SearchTree()
                yield Detail()
        yield ProblemInput(
            placeholder="type a math problem and press Enter (F1: help, Ctrl+Q: quit)"
        )
        yield StatusBar(self._models_line(), self._search_line())
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        for note in self.notes:
            self.query_one(ChatLog).add_note(note)
        self.worker = self.run_worker(
            self.runner.run, name="engine", thread=True, exit_on_error=False
        )

    def _models_line(self) -> str:
        s = self.settings
        return (
            f"gen {display_name(s.model)} · prm "
            f"{display_name(s.prm) if s.prm else display_name(s.model)}"
        )

    def _search_line(self) -> str:
        c = self.config
        width = f" width {c.width}" if c.grows_tree else ""
        return f"{self.policy.name} · {c.strategy} beams {c.beams}{width}"

    # ------------------------------------------------------------------ input
    def on_input_submitted(self, event: Input.Submitted) -> None:
        problem = event.value.strip()
        if not problem:
            return
        chat = self.query_one(ChatLog)
        if why := blank_problem(problem):  # zero-width characters alone: nothing to solve
            chat.add_note(f"{why}; type the problem's text", error=True)
            return
        if self.failed:
            chat.add_note(f"cannot solve: {self.failed}", error=True)
            return
        if self.searching:
            self.notify("a search is running; Esc cancels it", severity="warning")
            return
        event.input.value = ""
        chat.add_problem(problem)
        self.state = SearchState(problem)
        self.query_one(SearchTree).reset(self.state)
        self.query_one(Detail).show(self.state, None)
        self.query_one(StatusBar).set_progress(None)
        self.searching, self.cancelling = True, False
        self.runner.submit(problem, self.config)
        if self.query_one(StatusBar).phase == "ready":
            self.query_one(StatusBar).set_phase("searching")

    # ------------------------------------------------------------------ worker messages
    def on_runner_status(self, message: RunnerStatus) -> None:
        if self.closing:
            return
        self.query_one(StatusBar).set_phase(
            "searching" if message.ready and self.searching else message.text
        )

    def on_runner_note(self, message: RunnerNote) -> None:
        if not self.closing:
            self.query_one(ChatLog).add_note(message.text)

    def on_runner_failed(self, message: RunnerFailed) -> None:
        if self.closing:
            return
        if self.searching:
            self._give_back_problem()
        self.searching = self.cancelling = False
        self.query_one(ChatLog).add_note(message.error, error=True)
        if message.fatal:
            self.failed = message.error
            self.query_one(StatusBar).set_phase("models failed to load")
        else:
            self.query_one(StatusBar).set_phase("ready")

    def _give_back_problem(self) -> None:
        """The problem that was not solved (too long for the model, say) goes back into the input,
        unless something new was typed there meanwhile: the input was cleared on Enter, and the
        error says to shorten it."""
        field = self.query_one(Input)
        if self.state is not None and not field.value:
            field.value = self.state.question

    def on_engine_event(self, message: EngineEvent) -> None:
        event, state = message.event, self.state
        if state is None or self.closing:
            return
        if isinstance(event, Progress):
            self.query_one(StatusBar).set_progress(event)
            return
        changed = state.apply(event)
        if changed:
            self.query_one(SearchTree).update_nodes(changed)
        if isinstance(event, NodeExtended):
            self._refresh_detail(event.node_id)
        elif isinstance(event, RequestDone):
            self._finish(event.result)
        elif changed:
            self._refresh_detail(None)

    def _refresh_detail(self, grown: int | None) -> None:
        """Show the highlighted step's path, or, with the cursor on the problem line, the step
        growing last."""
        state = self.state
        assert state is not None
        tree = self.query_one(SearchTree)
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        target = cursor if cursor is not None else state.latest
        if grown is not None and grown not in {n.id for n in state.path(target)}:
            return
        self.query_one(Detail).show(state, target)

    def _finish(self, result: SearchResult) -> None:
        self.searching = self.cancelling = False
        chat = self.query_one(ChatLog)
        if result.status == "cancelled" and result.reason == "cancelled":
            chat.add_note("search cancelled")
        else:
            chat.add_answer(answer_markdown(result))
            if result.grader.note:
                chat.add_note(result.grader.note)
        try:
            model, policy, c = display_name(self.settings.model), self.policy.name, self.config
            self.history.append(HistoryEntry.from_result(result, model, policy, c.beams, c.width))
        # a full disk or a read-only home: the answer is on screen, the app goes on
        except OSError as e:
            chat.add_note(f"not saved to the history: {e}", error=True)
        # it holds the engine's last Progress: the totals, the KV freed
        bar = self.query_one(StatusBar)
        if result.status == "cancelled":  # a rate and counts of a search cut short say nothing
            bar.set_progress(None)
        bar.set_phase("ready")
        self._refresh_detail(None)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if self.state is not None:
            self._refresh_detail(None)

    # ------------------------------------------------------------------ actions
    def action_cancel(self) -> None:
        if self.searching:
            self.cancelling = True
            self.runner.cancel()
            self.query_one(StatusBar).set_phase("cancelling... (Ctrl+C quits)")

    def action_toggle_pruned(self) -> None:
        tree = self.query_one(SearchTree)
        tree.toggle_pruned()
        self.notify(
            "pruned branches shown" if tree.show_pruned else "pruned branches hidden", timeout=2
        )

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            shown = settings_markdown(self.settings, self.config, self.policy, self.history.path)
            self.push_screen(HelpScreen(shown))

    def action_history(self) -> None:
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(*self.history.read()), self._reuse_problem)

    def _reuse_problem(self, problem: str | None) -> None:
        if problem:
            field = self.query_one(Input)
            field.value = problem
            field.focus()

    async def action_interrupt(self) -> None:
        """Ctrl+C, as a terminal user expects of it: cancels a running search (as Esc does); quits
        when none runs, or while a cancel (Ctrl+C or Esc) waits for the engine's step to end."""
        if self.searching and not self.cancelling:
            self.action_cancel()
        else:
            await self.action_quit(INTERRUPTED)

    async def action_quit(self, return_code: int = 0) -> None:
        self.query_one(StatusBar).set_phase("stopping...")
        await self.stop_worker()
        self.exit(return_code=return_code)

    async def stop_worker(self) -> None:
        """Ask the worker to stop and wait for it: its thread must not outlive the app (the engine
        holds models)."""
        self.closing = True
        self.runner.stop()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while (
            not self.runner.finished.is_set()
            and self.worker is not None
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.02)

    async def on_unmount(self) -> None:
        await self.stop_worker()
