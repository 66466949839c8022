"""One line under the input: which models and search, what the worker is doing, and live engine counters."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from edgereason.events import Progress


def _kv(used: int, capacity: int) -> str:
    return f"{used / 1000:.1f}k/{capacity / 1000:.0f}k"


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

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._render_line()

    def set_progress(self, progress: Progress | None) -> None:
        self.progress = progress
        self._render_line()

    def _render_line(self) -> None:
        line = Text.assemble((self.phase, "bold"), "  ", self.models, "  ", self.search)
        p = self.progress
        if p is not None:
            rate = p.generated_tokens / p.elapsed_s if p.elapsed_s > 0 else 0.0
            line.append(f"  {rate:.0f} tok/s  PRM {p.prm_calls}  "
                        f"KV gen {_kv(p.generator_kv_used, p.generator_kv_capacity)} "
                        f"prm {_kv(p.verifier_kv_used, p.verifier_kv_capacity)}  spec reused {p.spec_tokens_reused}")
        self.update(line)
