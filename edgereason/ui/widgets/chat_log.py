"""The conversation: problems as typed, answers as Markdown, notes (cancelled, errors) in
between."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from edgereason.util.terminal import safe_text


class ChatLog(VerticalScroll):
    DEFAULT_CSS = """
    ChatLog { border: round $primary-darken-2; border-title-align: left; }
    ChatLog > .problem { margin: 1 0 0 0; padding: 0 1; background: $boost; text-style: bold; }
    ChatLog > .answer { margin: 0; padding: 0 1; }
    ChatLog > .note { padding: 0 1; color: $text-muted; text-style: italic; }
    ChatLog > .error { padding: 0 1; color: $error; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "chat"

    def add_problem(self, text: str) -> None:
        self._add(Static(f"> {safe_text(text)}", classes="problem", markup=False))

    def add_answer(self, markdown: str) -> None:
        """markdown: made safe to print (format.answer_markdown); a link in it opens nothing."""
        self._add(Markdown(markdown, classes="answer", open_links=False))

    def add_note(self, text: str, error: bool = False) -> None:
        """text: may quote a server or a model (an error's message)."""
        self._add(Static(safe_text(text), classes="error" if error else "note", markup=False))

    def _add(self, widget: Static | Markdown) -> None:
        self.mount(widget)
        self.call_after_refresh(self.scroll_end, animate=False)
