"""The live search tree: one line per step with status glyph, PRM score and a preview of the step
text."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from edgereason.ui.state import SearchState, StepView
from edgereason.util.readable import readable_math
from edgereason.util.terminal import safe_text

LOOK: dict[str, tuple[str, str]] = {  # status -> (glyph, style)
    "generating": ("…", "yellow"),
    "speculative": ("◇", "magenta"),
    "waiting": ("○", "cyan"),
    "verified": ("◆", "blue"),
    "selected": ("✔", "green"),
    "pruned": ("✗", "dim red"),
    "complete": ("★", "bold green"),
    "cancelled": ("■", "dim yellow"),  # pruned by Esc, not judged: shown, not struck out
}
PREVIEW = 64


def node_label(node: StepView, best: bool) -> Text:
    cancelled = node.prune_rule == "cancelled"
    # a status newer than this table still renders
    glyph, style = LOOK.get("cancelled" if cancelled else node.status, ("·", ""))
    score = f"{node.score:.2f}" if node.score is not None else " -- "
    preview = " ".join(readable_math(safe_text(node.text)).split())
    preview = preview[: PREVIEW - 1] + "…" if len(preview) > PREVIEW else preview
    label = Text.assemble(
        (f"{glyph} ", style),
        (score, "bold" if best else ""),
        " ",
        (preview or node.status, "dim italic" if not preview else ""),
    )
    if node.status == "pruned":
        label.stylize("dim" if cancelled else "dim strike")
    if best:
        label.stylize("bold on #1f3a2a")
    return label


class SearchTree(Tree[int]):
    """Mirrors a SearchState. Lines change on step-level events only; pruned lines are hidden unless
    shown, but for those a cancel pruned: the tree stays as it was when Esc stopped it."""

    DEFAULT_CSS = "SearchTree { border: round $primary-darken-2; border-title-align: left; }"
    # p and h here only, as the help says: F2 and F3 are the app-wide keys
    BINDINGS = [
        Binding("p", "app.toggle_pruned", "Pruned", show=False),
        Binding("h", "app.history", "History", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__("no search yet", **kwargs)
        self.border_title = "search tree"
        self.state: SearchState | None = None
        self.show_pruned = False
        self._lines: dict[int, TreeNode[int]] = {}
        self._best: set[int] = set()

    def reset(self, state: SearchState) -> None:
        self.state = state
        self._lines.clear()
        self._best = set()
        self.clear()
        question = safe_text(" ".join(state.question.split())[: PREVIEW * 2])  # as typed
        self.root.set_label(Text(question, style="bold"))
        self.root.data = None
        for node in state.nodes.values():
            self._place(node)
        self._rehighlight()
        self.root.expand()

    def toggle_pruned(self) -> None:
        self.show_pruned = not self.show_pruned
        if self.state is not None:
            self.reset(self.state)

    def update_nodes(self, ids: list[int]) -> None:
        if self.state is None:
            return
        for nid in ids:
            self._place(self.state.nodes[nid])
        self._rehighlight()

    def _visible(self, node: StepView) -> bool:
        shown = self.show_pruned or node.status != "pruned" or node.prune_rule == "cancelled"
        return node.parent is not None and shown

    def _place(self, node: StepView) -> None:
        """Add, relabel or remove the node's line; a line exists only once its parent's line
        does."""
        line = self._lines.get(node.id)
        if not self._visible(node):
            if line is not None:
                self._drop(node.id)
            return
        if line is not None:
            line.set_label(node_label(node, node.id in self._best))
            return
        parent = self.root if node.depth == 1 else self._lines.get(node.parent)
        if parent is not None:
            parent.allow_expand = True
            self._lines[node.id] = parent.add(
                node_label(node, node.id in self._best),
                data=node.id,
                expand=True,
                allow_expand=False,
            )

    def _drop(self, nid: int) -> None:
        """Remove a line with its subtree (Tree removes the sub-lines; forget them here too)."""
        assert self.state is not None
        line = self._lines.pop(nid)
        stack = list(self.state.nodes[nid].children)
        while stack:
            child = stack.pop()
            self._lines.pop(child, None)
            stack.extend(self.state.nodes[child].children)
        line.remove()

    def _rehighlight(self) -> None:
        assert self.state is not None
        best = self.state.best_path()
        changed, self._best = best ^ self._best, best
        for nid in changed:
            if nid in self._lines:
                self._lines[nid].set_label(node_label(self.state.nodes[nid], nid in best))
