"""The one-line field the problem is typed or pasted into."""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from edgereason.util.terminal import safe_text


def one_line(text: str) -> str:
    """Pasted lines joined by single spaces, blank ones dropped: a word problem copied from a page
    or a file."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


class ProblemInput(Input):
    def validate_value(self, value: str) -> str:
        """What is pasted or put back from the history is shown, and sent, with control characters
        (and line breaks: it is one line) as escapes."""
        return safe_text(value, one_line=True)

    def _on_paste(self, event: events.Paste) -> None:
        # Input's own handler (run after this one unless prevented) keeps the first line of a paste
        # and drops the rest without a word: a problem pasted over several lines was sent cut after
        # its first line
        event.prevent_default()
        event.stop()
        super()._on_paste(events.Paste(one_line(event.text)))
