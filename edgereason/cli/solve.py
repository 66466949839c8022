"""`edgereason solve PROBLEM`: one search, the answer and a summary (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from edgereason.backends.torch.one_search import one_search_a_process
from edgereason.cli.common import solve_settings
from edgereason.cli.flags_models import add_model_args
from edgereason.cli.flags_search import add_policy_arg, add_search_args
from edgereason.cli.help import brief
from edgereason.cli.progress import SearchProgress, is_terminal, pull_progress
from edgereason.engine.result import SearchResult
from edgereason.errors import ConfigError
from edgereason.session.auto_policy import AutoChoice, is_auto
from edgereason.session.backend_rule import Run
from edgereason.session.opening import open_session
from edgereason.tree import FINISH_WORDS
from edgereason.util import startup, text
from edgereason.util.readable import hanging, readable_math
from edgereason.util.terminal import safe_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "solve",
        help="solve one math problem with PRM-guided search",
        description="Solve one math problem: the generator proposes steps, the PRM scores "
        "them, the search keeps the best paths. Progress goes to stderr, the answer to stdout.",
    )
    p.add_argument(
        "problem", metavar="PROBLEM", help="the problem text, or - to read it from stdin"
    )
    add_model_args(p)
    add_search_args(p, from_recipe=True)
    add_policy_arg(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (answer, paths, tree, metrics; on a failure: error, exit_code)",
    )
    p.add_argument(
        "--show-tree", action="store_true", help="print the surviving tree with step scores"
    )
    p.add_argument("--raw", action="store_true", help="print the steps as the model wrote them")
    brief(p, "solve")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # started with stdout closed (`>&-`): print() would drop the answer without a word
    if sys.stdout is None:
        raise ConfigError(
            "stdout is closed, so the answer would be lost; let it print, or redirect it to a file "
            "(> answer.txt)"
        )
    problem = text.read_stdin() if args.problem == "-" else args.problem
    if why := text.blank_problem(problem):
        raise ConfigError(f"{why}; pass the problem text (or - to read it from stdin)")
    asked = solve_settings(args)
    choice, config, policy = asked.search, asked.search.config, asked.policy
    one_search_a_process()  # the torch backend's decode attention for one search
    session = open_session(asked.models, progress=pull_progress)
    # a terminal: a line in place, the best path below it; a log: one every few s
    budget = {"max_steps": config.max_steps, "max_path_tokens": config.max_path_tokens}
    status = SearchProgress(config.beams, **budget)
    # what came before the search is the start-up; rounded once, so --json and the line agree
    began = round(startup.since_command(), 3)
    try:
        result = session.engine(policy, on_event=status).solve(problem, config)
        auto = session.auto_choice() if is_auto(policy) else None
    finally:
        status.close()
        session.close()
    answered = startup.since_command()
    if result.status == "done":  # what --backend auto compares (session/backend_rule.py)
        session.record_speed(Run(began, answered - began, result.metrics.generated_tokens))
    if args.json:
        print(json.dumps(json_out(result, session.backend, auto, began), indent=2))
    else:
        print_text(result, args.show_tree, args.raw)
    if asked.models.verbose:
        print(
            f"edgereason: {startup.summary()}; the search began {began:.2f} s after the command, "
            f"the answer came at {answered:.2f} s",
            file=sys.stderr,
        )
    if note := choice.note():  # after the answer: an error before the search stays one line
        print(note, file=sys.stderr)
    if result.grader.note:
        print(f"edgereason: note: {result.grader.note}", file=sys.stderr)
    return 0 if result.status == "done" else 1


def json_out(result: SearchResult, backend: str, auto: AutoChoice | None, began: float) -> dict:
    """--json's object: the result, the backend that ran, what `--policy auto` chose, and the
    start-up's phases with the seconds from the command to the search."""
    out = result.as_dict()
    out["backend"] = backend
    if auto:  # which preset `auto` ran, and why
        out["metrics"]["auto_policy"] = auto.as_dict()
    out["startup_s"] = {**startup.seconds(), "before_search": began}
    return out


def shown(text: str, raw: bool) -> str:
    """What a model wrote, as printed: made safe for the terminal, then (unless raw) its math made
    readable."""
    return safe_text(text) if raw else readable_math(safe_text(text))


def print_text(result: SearchResult, show_tree: bool, raw: bool = False) -> None:
    """The answer, the best path and a summary. The model's text (and a failure's reason, which may
    quote a server) goes through safe_text, piece by piece: it must not drive the terminal."""
    m = result.metrics
    if result.status != "done":
        print(
            f"search {result.status}: {safe_text(str(result.reason), one_line=True)}",
            file=sys.stderr,
        )
    answer = "(no boxed answer found)" if result.answer is None else shown(result.answer, raw)
    print(f"Answer: {answer}")
    if best := result.answer_path():
        print(f"\n{result.best_path_title(best)}:")
        width = shutil.get_terminal_size().columns if is_terminal(sys.stdout) else None
        for i, (step, score) in enumerate(best.steps, 1):
            s = f"{score:.3f}" if score is not None else "  -  "
            head, body = f"  [{i}] ({s}) ", shown(step, raw).strip()
            # raw: the model's lines as they were written
            print(head + body if raw else hanging(head, body, width))
    if show_tree:
        print("\nSurviving tree:")
        print_tree(result, raw)
    print(
        f"\n{m.generated_tokens} tokens in {m.wall_s:.1f}s ({m.throughput_tok_s:.1f} tok/s, "
        f"goodput {m.goodput_tok_s:.1f} tok/s), {m.prm_calls} PRM calls ({m.prm_tokens} PRM "
        "tokens)"
    )


def print_tree(result: SearchResult, raw: bool = False) -> None:
    """Surviving steps, indented by depth: score, state (how a finished path ended), and the step's
    first words."""
    nodes = {n["id"]: n for n in result.tree}
    children: dict[int | None, list[int]] = {}
    for n in result.tree:
        if n["status"] != "pruned":
            children.setdefault(n["parent"] if n["parent"] in nodes else None, []).append(n["id"])

    def walk(parent: int | None, indent: int) -> None:
        for nid in children.get(parent, []):
            n = nodes[nid]
            score = f"{n['score']:.3f}" if n["score"] is not None else "  -  "
            state = (
                FINISH_WORDS.get(n["finish"], n["status"])
                if n["status"] == "complete"
                else n["status"]
            )
            step = clip(shown(n["text"], raw), 70)
            print(f"{'  ' * indent}- ({score}) [{state}] {step}")
            walk(nid, indent + 1)

    walk(None, 1)


def clip(step: str, width: int) -> str:
    """A step's text on one line, at most `width` characters; a cut one ends at a word boundary
    (unless a single word is longer than half the width) followed by "..."."""
    line = " ".join(step.split())
    if len(line) <= width:
        return line
    space = line.rfind(" ", 0, width - 2)
    return line[: space if space > width // 2 else width - 3].rstrip() + "..."
