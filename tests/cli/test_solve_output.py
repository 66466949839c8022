"""What `solve` prints: readable math in the answer, the steps and the tree (`--raw`: as the model
wrote it; `--json` stays raw), each step's later lines under its first.

data/solve_readme_qwen15b.json is `edgereason solve "<the README's problem>" --json` as
Qwen2.5-Coder-1.5B answered it on 2 CPU cores (75 s): its steps hold `\\[ ... \\]`, `\\times` and
`\\(\\boxed{18}\\)`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from edgereason.cli.solve import print_text
from edgereason.engine.result import FinalPath, RequestMetrics, SearchResult
from edgereason.util.terminal import safe_text

RECORDED = Path(__file__).parent / "data" / "solve_readme_qwen15b.json"
COMMAND = re.compile(r"\\[A-Za-z]+")
STEP_HEAD = re.compile(r"^  \[(\d+)\] \((?:\d\.\d{3}|  -  )\) ")


def recorded_result() -> SearchResult:
    out = json.loads(RECORDED.read_text())
    paths = [
        FinalPath([(s["text"], s["score"]) for s in p["steps"]], p["score"], p["answer"], node_id=i)
        for i, p in enumerate(out["paths"])
    ]
    metrics = RequestMetrics(
        **{k: v for k, v in out["metrics"].items() if k in RequestMetrics.__dataclass_fields__}
    )
    return SearchResult(
        "r", "the README's problem", out["answer"], paths, out["tree"]["nodes"], metrics
    )


def printed(capsys, raw: bool) -> str:
    print_text(recorded_result(), show_tree=True, raw=raw)
    return capsys.readouterr().out


def test_the_readme_problem_prints_no_backslash_command(capsys) -> None:
    result = recorded_result()
    assert any(COMMAND.search(text) for text, _ in result.answer_path().steps)  # as the model wrote
    out = printed(capsys, raw=False)
    assert not COMMAND.search(out), COMMAND.findall(out)
    assert out.startswith("Answer: 18\n")
    assert "9 × 2 = 18" in out and "Surviving tree:" in out


def test_raw_prints_the_steps_as_the_model_wrote_them(capsys) -> None:
    out = printed(capsys, raw=True)
    for text, _ in recorded_result().answer_path().steps:
        assert text.strip() in out


def test_a_steps_later_lines_stay_under_its_first(capsys) -> None:
    lines = printed(capsys, raw=False).split("\n\nSurviving tree:")[0].splitlines()
    steps = [i for i, line in enumerate(lines) if STEP_HEAD.match(line)]
    assert len(steps) == len(recorded_result().answer_path().steps)
    column = STEP_HEAD.match(lines[steps[0]]).end()
    later = [line for line in lines[steps[0] :] if line and not STEP_HEAD.match(line)]
    assert later and all(line[:column].isspace() for line in later), later
    display = next(i for i, line in enumerate(lines) if line.strip() == "9 × 2 = 18")
    indent = [len(line) - len(line.lstrip()) for line in lines[display - 1 : display + 1]]
    # display math under the line it opened on
    assert indent[1] == indent[0] + 2, lines[display - 1 : display + 1]


def test_model_text_nested_too_deep_prints_as_written(capsys) -> None:
    """500 nested `\\frac{` (some 1,000 tokens, inside one default step) ended solve in
    "unexpected RecursionError" before its answer; such text prints as written, made safe."""
    deep = "\\frac{" * 500 + "1" + "}{2}" * 500
    step = f"So the answer is $\\boxed{{{deep}}}$.\x1b[2J"
    node = {"id": 1, "parent": None, "depth": 1, "text": step, "score": 0.9, "finish": "answer"}
    tree = [{**node, "status": "complete"}]
    path = FinalPath([("Halve it: \\frac{1}{2}.", 0.5), (step, 0.9)], 0.9, deep, node_id=1)
    print_text(SearchResult("r", "q", deep, [path], tree, RequestMetrics()), show_tree=True)
    out = capsys.readouterr().out
    assert out.startswith(f"Answer: {deep}\n")
    assert "[1] (0.500) Halve it: 1/2." in out  # the step that converts still does
    assert f"[2] (0.900) {safe_text(step)}" in out and "\x1b" not in out
    assert "- (0.900) [boxed answer] So the answer is $\\boxed{\\frac{\\frac{" in out  # the tree


def run_solve(model: Path, *flags: str) -> subprocess.CompletedProcess:
    problem = (
        r"What is $\frac{1}{2} \times 8$? Show the computation as \[ ... \] and put the answer in "
        r"\boxed{}."
    )
    args = [
        "solve",
        problem,
        "--model",
        str(model),
        "--temperature",
        "0",
        "--beams",
        "1",
        "--max-steps",
        "2",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", *args, "--max-step-tokens", "64", *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def test_solve_on_smollm2_prints_readable_math_and_raw_as_written(smollm2_path) -> None:
    """Greedy SmolLM2 answers in LaTeX: --raw prints it as written, the text output none of it (the
    same steps: greedy)."""
    raw = run_solve(smollm2_path, "--raw").stdout
    # the model wrote LaTeX: the test means something
    assert "Best path" in raw and COMMAND.search(raw), raw
    readable = run_solve(smollm2_path).stdout
    assert "Best path" in readable and not COMMAND.search(readable), readable


def test_the_chat_shows_the_same_answer_readable() -> None:
    """One converter: the chat's answer (ui/format.answer_markdown) and its tree and path widgets
    use the same readable_math as solve."""
    from edgereason.ui import format as chat_format
    from edgereason.ui import screens
    from edgereason.ui.widgets import detail, tree_view
    from edgereason.util.readable import readable_math

    markdown = chat_format.answer_markdown(recorded_result())
    assert "**Answer: 18**" in markdown and "9 × 2 = 18" in markdown
    assert not COMMAND.search(markdown), COMMAND.findall(markdown)
    assert {m.readable_math for m in (chat_format, screens, detail, tree_view)} == {readable_math}
