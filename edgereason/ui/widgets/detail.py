"""The whole path of one node, step by step with scores; it grows while the node is generated."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from edgereason.ui.state import SearchState
from edgereason.ui.widgets.tree_view import LOOK
from edgereason.util.readable import readable_math
from edgereason.util.terminal import safe_text


class Detail(VerticalScroll):
    DEFAULT_CSS = """
    Detail { border: round $primary-darken-2; border-title-align: left; }
    Detail > Static { width: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "path"
        self.node_id: int | None = None

    def compose(self):
        yield Static(id="detail-text")

    def show(self, state: SearchState, node_id: int | None) -> None:
        self.node_id = node_id
        path = state.path(node_id)
        text = Text()
        for i, step in enumerate(path, 1):
            glyph, style = LOOK.get(step.status, ("·", ""))
            score = f"{step.score:.3f}" if step.score is not None else "--"
            text.append(
                f"step {i}  {glyph} {step.status}  score {score}  ({step.n_tokens} tokens)\n",
                style=style,
            )
            text.append(readable_math(safe_text(step.text)).strip() + "\n\n")
        if not path:
            text.append("highlight a step in the tree to read its path", style="dim italic")
        self.border_title = f"path to node {node_id}" if path else "path"
        follow = self.scroll_y >= self.max_scroll_y - 1
        self.query_one(Static).update(text)
        if follow:
            self.call_after_refresh(self.scroll_end, animate=False)
