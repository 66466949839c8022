"""A bench's runs, once its settings are checked (evaluation/plan.py): --out claimed
(evaluation/out_folder.py), the sessions, every run with a save after each finished problem, what
`--resume` keeps or continues (evaluation/resume.py), and the end: the table is printed whatever
could be written, and a save that failed is one error line (exit 1). Progress and notes go through
the caller's Display."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from edgereason.engine.prompt import prompt_ids
from edgereason.errors import ConfigError
from edgereason.evaluation.examples import print_examples
from edgereason.evaluation.out_folder import OutFolder
from edgereason.evaluation.plan import BenchSettings, Specs
from edgereason.evaluation.report import print_table
from edgereason.evaluation.resume import (
    check_records,
    check_same_bench,
    check_same_problems,
    merge_runs,
    run_id,
    spec_id,
)
from edgereason.evaluation.runner import RunInterrupted, RunSpec, rate_label, run_one
from edgereason.search.dataset import Problem
from edgereason.session.backend_rule import Run
from edgereason.session.opening import Session, open_session
from edgereason.util import interrupts, startup
from edgereason.util.terminal import shown_path


@dataclass(frozen=True)
class Display:
    """How a bench shows itself on the terminal (the CLI's cli/progress.py)."""

    note: Callable[[str], None]  # a line on stderr, under an open progress bar
    bar: Callable[[str], Callable[[int, int], None]]  # a run's progress bar, by its label
    end_line: Callable[[], object]  # ends an open progress bar's line
    pull_progress: Callable[[str, int, int], None]  # a model's download


def run_bench(
    settings: BenchSettings,
    config: dict,
    problems: list[Problem],
    specs: Specs,
    show: Display,
) -> int:
    """Claims --out (after every setting is checked: a bench refused later, on a model or a
    problem, leaves nothing behind), checks a resumed bench's results and that it is the same
    bench on the same problems, then runs it."""
    with OutFolder(settings.out, settings.force, settings.resume, show.note) as folder:
        if (earlier := folder.earlier()) is not None:
            check_records(earlier, settings.out)
            check_same_bench(earlier, config, settings.out)
            if note := check_same_problems(earlier, config, problems, settings.out):
                show.note(f"edgereason: note: {note}")
            resumed = [*earlier.config.get("resumed", []), config["started"]]
            config = {**earlier.config, "resumed": resumed}
        return run_all(settings, folder, config, problems, specs, show)


def run_all(
    settings: BenchSettings,
    folder: OutFolder,
    config: dict,
    problems: list[Problem],
    specs: Specs,
    show: Display,
) -> int:
    """Opens one session per split, runs every spec (or keeps an earlier bench's, with --resume)."""
    earlier = folder.earlier()
    past = {run_id(run): run for run in earlier.runs} if earlier else {}
    unfinished = {"interrupted": True}
    if past and all(not past.get(spec_id(spec), unfinished)["interrupted"] for _, spec in specs):
        print_table(list(past.values()), sys.stdout)
        complete = f"every run in {shown_path(folder.path)} is complete"
        show.note(f"edgereason: note: {complete}; nothing is left to run")
        return 0
    sessions: dict[str, Session] = {}
    runs: list[dict] = []
    try:
        for split in dict.fromkeys(split for split, _ in specs):
            models = replace(settings.models, split=split)
            sessions[split] = open_session(models, progress=show.pull_progress)
            _check_problems_fit(sessions[split], problems, settings.dataset)
        # auto's choice: one for every split
        config["backend"] = next(iter(sessions.values())).backend
        for i, (split, spec) in enumerate(specs, 1):
            what = f"{spec.name} N={spec.config.beams} rate={rate_label(spec.rate)}"
            label = f"[{i}/{len(specs)}] {what}"
            run = _run(folder, config, runs, sessions[split], spec, problems, past, label, show)
            runs.append(run)
    except RunInterrupted as stop:
        show.end_line()
        if stop.run["problems"]:
            runs.append(stop.run)
        stopped = interrupts.describe(stop.stop)
        if not runs:  # nothing to keep: the folder is left as it was
            show.note(f"{stopped}: no problem had finished; nothing was written")
        elif _finish(folder, config, runs, settings.plots, show):
            show.note(f"{stopped}: wrote {len(runs)} run(s) to {shown_path(folder.path)}")
        return interrupts.exit_code(stop.stop)  # 130 Ctrl-C, 143 SIGTERM, 129 a closed terminal
    finally:
        for session in sessions.values():
            session.close()
    return 0 if _finish(folder, config, runs, settings.plots, show) else 1


def _run(
    folder: OutFolder,
    config: dict,
    runs: list[dict],
    session: Session,
    spec: RunSpec,
    problems: list[Problem],
    past: dict,
    label: str,
    show: Display,
) -> dict:
    """One spec's run: an earlier bench's where it ran whole; else its problems that did not finish
    there, saved after each one, and recorded with those that did."""
    earlier = past.get(spec_id(spec))
    if earlier and not earlier["interrupted"]:
        return earlier
    finished = {pp["id"] for pp in earlier["per_problem"]} if earlier else set()

    def whole(run: dict) -> dict:
        return merge_runs(earlier, run) if earlier else run

    def save(part: dict) -> None:
        folder.save(config, [*runs, whole(part)])

    todo = [p for p in problems if p.id not in finished]
    began = startup.since_command()
    try:
        run = run_one(session, spec, todo, show.bar(label), save)
    except RunInterrupted as stop:
        stop.run = whole(stop.run)
        raise
    show.end_line()
    # this run's own problems, a resumed run's earlier ones aside: what --backend auto compares
    session.record_speed(Run(began, run["wall_s"], run["generated_tokens"]))
    return whole(run)


def _finish(folder: OutFolder, config: dict, runs: list[dict], plots: bool, show: Display) -> bool:
    """Save, print the table (whether or not the save worked) and draw the plots; whether the
    results are written."""
    saved = folder.save(config, runs)
    print_table(runs, sys.stdout)
    print_examples(runs, sys.stdout)
    if graded := sum(run.get("graded_as_text", 0) for run in runs):
        as_text = f"{graded} problem(s) were graded as text after the grading budget ran out"
        show.note(f"edgereason: note: {as_text}")
    if plots and saved:
        from edgereason.evaluation.plots import write_plots  # matplotlib only when plots are drawn

        try:
            write_plots(folder.path, runs)
        except OSError as e:  # a folder in the way, a full disk: the results are written, so a note
            unwritten = f"{e.strerror}: {shown_path(e.filename)}"
            show.note(f"edgereason: note: the plots were not written ({unwritten})")
    if saved:
        show.note(f"results in {shown_path(folder.path / 'results.json')}")
        return True
    held = "is not there"
    if folder.saved_problems:
        held = f"holds the {folder.saved_problems} problem(s) saved before"
    why = folder.unsaved.strerror if folder.unsaved else "?"
    unwritten = f"the results could not be written to {shown_path(folder.path)} ({why})"
    show.note(f"edgereason: error: {unwritten}; its results.json {held}")
    return False


def _check_problems_fit(session: Session, problems: list[Problem], dataset: str) -> None:
    """Every problem fits the session's generator (its trained context and KV memory), before the
    first run."""
    for p in problems:
        try:
            prompt_ids(session.generator, p.problem)
        except ConfigError as e:
            raise ConfigError(f"{dataset}: problem {p.id!r}: {e}") from None
