"""Text the chat shows: for a finished search Markdown for the answer, every piece made safe
(util/terminal.safe_text) and then its LaTeX readable (util/readable), as solve prints it.
Textual writes text to the terminal as it is: an ESC the model generated, or one in the history
file, was a live escape sequence there (it cleared the screen, set the window title, which outlives
the app). Model text is never Textual markup (Static with markup=False, rich Text, or Markdown,
which reads no markup), and a link in it opens nothing (Markdown with open_links=False)."""

from __future__ import annotations

from pathlib import Path

from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.engine.result import SearchResult
from edgereason.session.settings import ModelSettings
from edgereason.util.readable import readable_math
from edgereason.util.terminal import safe_text


def answer_markdown(result: SearchResult) -> str:
    m = result.metrics
    lines = []
    if result.status != "done":
        lines.append(f"*Search {result.status}: {result.reason or result.status}*\n")
    answer = readable_math(safe_text(result.answer)) if result.answer is not None else None
    lines.append(f"**Answer: {answer}**" if answer else "**No boxed answer found.**")
    if best := result.answer_path():
        lines.append(f"\n{result.best_path_title(best)}:\n")
        for i, (text, score) in enumerate(best.steps, 1):
            s = f"{score:.2f}" if score is not None else "–"
            step = " ".join(readable_math(safe_text(text)).split())
            lines.append(f"{i}. `{s}` {step}")
    lines.append(
        f"\n*{m.generated_tokens} tokens in {m.wall_s:.1f} s ({m.throughput_tok_s:.1f} tok/s), "
        f"{m.prm_calls} PRM calls*"
    )
    return safe_text("\n".join(lines))


def settings_markdown(s: ModelSettings, c: SearchConfig, policy: Policy, history: Path) -> str:
    """The help screen's list of what this chat runs with."""
    switches = ", ".join(f"{k}={v}" for k, v in policy.switches().items())
    return (
        f"- generator: `{s.model}`; PRM: `{s.prm or s.model}` ({s.prm_format})\n"
        f"- KV tokens: generator {s.generator_kv_tokens}, PRM {s.verifier_kv_tokens}; threads "
        f"{s.threads or 'auto'}\n"
        f"- search: {c.strategy}, beams {c.beams}, width {c.width}, max steps {c.max_steps}, "
        f"max step tokens {c.max_step_tokens}, max tokens {c.max_path_tokens}, aggregation "
        f"{c.aggregation}, selection {c.select}, vote {c.vote}\n"
        f"- sampling: temperature {c.sampling.temperature}, top-p {c.sampling.top_p}, seed "
        f"{c.sampling.seed}\n"
        f"- policy `{policy.name}`: {switches}\n"
        f"- history: `{history}`"
    )
