"""Text the chat shows: only printable characters, and for a finished search Markdown for the answer, LaTeX
turned into readable text."""

from __future__ import annotations

import re

from edgereason.engine.result import SearchResult
from edgereason.util.readable import readable_math

CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 (not tab, newline, CR: line ends), DEL, C1


def _symbol(control: re.Match[str]) -> str:
    code = ord(control.group())
    return chr(0x2400 + code) if code < 0x20 else ("\u2421" if code == 0x7F else "\ufffd")  # ␛ for ESC, ␡ for DEL


def visible(text: str) -> str:
    """`text` with its control characters shown as symbols, one for one. Textual writes text to the terminal as
    it is: an ESC the model generated, or one in the history file, was a live escape sequence there (it cleared
    the screen, set the window title, which outlives the app)."""
    return CONTROLS.sub(_symbol, text)


def answer_markdown(result: SearchResult) -> str:
    m = result.metrics
    lines = []
    if result.status != "done":
        lines.append(f"*Search {result.status}: {result.reason or result.status}*\n")
    answer = readable_math(visible(result.answer)) if result.answer is not None else None
    lines.append(f"**Answer: {answer}**" if answer else "**No boxed answer found.**")
    if best := result.answer_path():
        lines.append(f"\n{result.best_path_title(best)}:\n")
        for i, (text, score) in enumerate(best.steps, 1):
            s = f"{score:.2f}" if score is not None else "–"
            step = " ".join(readable_math(visible(text)).split())
            lines.append(f"{i}. `{s}` {step}")
    lines.append(
        f"\n*{m.generated_tokens} tokens in {m.wall_s:.1f} s ({m.throughput_tok_s:.1f} tok/s), {m.prm_calls} PRM calls*"
    )
    return visible("\n".join(lines))
