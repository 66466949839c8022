"""Modal screens: help (keys and the settings this session runs with) and history browsing."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Markdown, OptionList, Static
from textual.widgets.option_list import Option

from edgereason.ui.history import HistoryEntry
from edgereason.util.readable import readable_math
from edgereason.util.terminal import safe_text

KEYS = """\
| key | action |
|---|---|
| Enter | send the problem in the input |
| Esc | cancel the running search (its tree stays, its steps marked ■) |
| Ctrl+C | cancel the running search; while a cancel waits for the engine's step, or with \
none running, quit (exit code 130); with text selected, copy it |
| Tab / Shift+Tab | move focus (input, tree, chat) |
| ↑ ↓ in the tree | highlight a step: its whole path shows below the tree |
| p (tree focused) or F2 | show / hide pruned branches |
| h (tree focused) or F3 | browse the history; Enter puts a past problem back in the input |
| F1 | this help |
| Ctrl+Q | quit |

Tree glyphs: `…` generating, `◇` speculative, `○` waiting for the PRM, `◆` scored, `✔` selected,
`★` complete, `✗` pruned. The highlighted band is the best path so far.
"""

# a modal screen ends a key's way to the bindings before the app's own: Ctrl+C over one copies the
# text selected there (the screen's own Ctrl+C, which these replace), else does what it does in the
# chat (cancel, or quit)
CTRL_C = [
    Binding("ctrl+c", "screen.copy_text", show=False),
    Binding("ctrl+c", "app.interrupt", show=False),
]


def _modal_css(name: str) -> str:
    """Screen CSS is scoped to the class, so each screen names itself."""
    return (
        f"{name} {{ align: center middle; }}\n{name} > Vertical {{ width: 90%; height: 85%; "
        f"border: thick $primary; background: $surface; padding: 0 1; }}\n"
    )


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = _modal_css("HelpScreen")
    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close"), *CTRL_C]

    def __init__(self, settings: str) -> None:
        super().__init__()
        self.settings = settings

    def compose(self) -> ComposeResult:
        with Vertical():
            settings = safe_text(self.settings)  # paths and names the user gave
            text = f"# edgereason chat\n\n{KEYS}\n## Settings (from the command line)\n\n{settings}"
            yield Markdown(text, open_links=False)


SKIPPED_NAMED = 3  # the most skipped history lines named one by one


def skipped_note(skipped: list[str]) -> str:
    """How many history lines were skipped, and the first few of them with what is wrong."""
    lines = "line was" if len(skipped) == 1 else "lines were"
    named = "; ".join(skipped[:SKIPPED_NAMED])
    more = f"; and {len(skipped) - SKIPPED_NAMED} more" if len(skipped) > SKIPPED_NAMED else ""
    return (
        f"{len(skipped)} unreadable history {lines} skipped (cut by a crash or not an entry): "
        f"{named}{more}"
    )


class HistoryScreen(ModalScreen[str | None]):
    """Past problems, newest first; Enter returns the highlighted problem so the app can put it in
    the input."""

    # min-width: an OptionList left no column for its text (a terminal under 18 columns) raised
    # ValueError in Rich's line wrapping, which ended the chat
    DEFAULT_CSS = (
        _modal_css("HistoryScreen")
        + """
    HistoryScreen OptionList { width: 45%; min-width: 10; }
    HistoryScreen #history-entry { width: 1fr; padding: 0 1; }
    """
    )
    BINDINGS = [Binding("escape,f3,q", "dismiss", "Close"), *CTRL_C]

    def __init__(self, entries: list[HistoryEntry], skipped: list[str] | None = None) -> None:
        super().__init__()
        self.entries = entries[::-1]
        # unreadable lines in the history file, each named: said, so a missing entry is explained
        self.skipped = skipped or []

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.skipped:
                yield Static(Text(safe_text(skipped_note(self.skipped))), id="history-skipped")
            if not self.entries:
                yield Static("No history yet: solved problems are saved here.")
                return
            with Horizontal():
                # Text, not a str: Textual reads a str as markup, and a problem with "[/]" in it
                # raised MarkupError
                yield OptionList(
                    *[
                        Option(
                            Text(safe_text(f"{e.time}  {' '.join(e.problem.split())[:60]}")),
                            id=str(i),
                        )
                        for i, e in enumerate(self.entries)
                    ]
                )
                yield Markdown(id="history-entry", open_links=False)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        e = self.entries[event.option_index]
        answer = readable_math(safe_text(e.answer)) if e.answer else "(none)"
        steps = "\n".join(
            f"{i}. {' '.join(readable_math(safe_text(s)).split())}"
            for i, s in enumerate(e.steps, 1)
        )
        self.query_one("#history-entry", Markdown).update(
            safe_text(
                f"**{e.problem}**\n\nAnswer: **{answer}** ({e.status}, score "
                f"{'-' if e.score is None else f'{e.score:.3f}'})\n\n{steps}\n\n*{e.model}, policy "
                f"{e.policy}, beams {e.beams}, width {e.width}, {e.tokens} tokens, {e.wall_s} s*"
            )
        )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.entries[event.option_index].problem)
