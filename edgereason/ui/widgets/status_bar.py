"""One line under the input: which models and search, what the worker is doing, and live engine
counters."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from edgereason.engine.events import Progress
from edgereason.util.terminal import safe_text


def _kv(used: int, capacity: int) -> str:
    # whole thousands for a capacity, but under 1000 tokens (--kv-tokens 256) that read "0.3k/0k"
    places = 1 if capacity < 1000 else 0
    return f"{used / 1000:.1f}k/{capacity / 1000:.{places}f}k"


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }"

    def __init__(self, models: str, search: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.models = models
        self.search = search
        self.phase = "loading models..."
        self.progress: Progress | None = None

    def on_mount(self) -> None:
        self._render_line()

    def on_resize(self) -> None:
        self._render_line()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._render_line()

    def set_progress(self, progress: Progress | None) -> None:
        self.progress = progress
        self._render_line()

    def _render_line(self) -> None:
        """What fits the bar's width. Where it is too narrow the parts the user chose (models,
        search) go first: during a search, tokens a second and each model's KV against its share say
        more."""
        parts = {"models": self.models, "search": self.search}
        p = self.progress
        if p is not None:
            rate = p.generated_tokens / p.elapsed_s if p.elapsed_s > 0 else 0.0
            parts |= {
                "rate": f"{rate:.0f} tok/s",
                "prm": f"PRM {p.prm_calls}",
                "kv": f"KV gen {_kv(p.generator_kv_used, p.generator_kv_capacity)} "
                f"prm {_kv(p.verifier_kv_used, p.verifier_kv_capacity)}",
                "spec": f"spec reused {p.spec_tokens_reused}",
            }
        width = self.size.width  # 0 before the first layout: show everything
        for dropped in (None, *_DROPPED_FIRST):
            parts.pop(dropped, None)
            if not width or len(self.phase) + sum(2 + len(t) for t in parts.values()) <= width:
                break
        line = Text(safe_text(self.phase, one_line=True), "bold")  # a pull's label, an error's
        for text in parts.values():
            line.append("  " + safe_text(text, one_line=True))
        self.update(line)


_DROPPED_FIRST = ("spec", "search", "models", "prm", "rate")
