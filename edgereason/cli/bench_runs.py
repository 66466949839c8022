"""A bench's runs, once its settings are checked and its --out is claimed (bench/out_folder.py): the
sessions, every run with a save after each finished problem, what `--resume` keeps or continues
(bench/resume.py), and the end: the table is printed whatever could be written, and a save that
failed is one error line (exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from edgereason.bench.examples import print_examples
from edgereason.bench.out_folder import OutFolder
from edgereason.bench.report import print_table
from edgereason.bench.resume import merge_runs, run_id, spec_id
from edgereason.bench.runner import RunInterrupted, RunSpec, rate_label, run_one
from edgereason.cli.common import model_settings
from edgereason.cli.progress import bar, end_line, pull_progress
from edgereason.engine.loop import prompt_ids
from edgereason.errors import ConfigError
from edgereason.search.dataset import Problem
from edgereason.session.opening import Session, open_session
from edgereason.util import interrupts

Specs = list[tuple[str, RunSpec]]  # (KV split, run), in the order they run


def note(line: str) -> None:
    """A note on stderr, under an open progress bar rather than onto its end."""
    end_line()
    print(line, file=sys.stderr)


def run_all(args: argparse.Namespace, folder: OutFolder, config: dict, problems: list[Problem], specs: Specs) -> int:
    """Opens one session per split, runs every spec (or keeps an earlier bench's, with --resume)."""
    earlier = folder.earlier()
    past = {run_id(run): run for run in earlier.runs} if earlier else {}
    if past and all(not past.get(spec_id(spec), {"interrupted": True})["interrupted"] for _, spec in specs):
        print_table(list(past.values()), sys.stdout)
        note(f"edgereason: note: every run in {folder.path} is complete; nothing is left to run")
        return 0
    sessions: dict[str, Session] = {}
    runs: list[dict] = []
    try:
        for split in dict.fromkeys(split for split, _ in specs):
            settings = model_settings(argparse.Namespace(**{**vars(args), "split": split}))
            sessions[split] = open_session(settings, progress=pull_progress)
            _check_problems_fit(sessions[split], problems, "stdin" if args.dataset == "-" else args.dataset)
        config["backend"] = next(iter(sessions.values())).backend  # auto's choice: one for every split
        for i, (split, spec) in enumerate(specs, 1):
            label = f"[{i}/{len(specs)}] {spec.name} N={spec.config.beams} rate={rate_label(spec.rate)}"
            runs.append(_run(folder, config, runs, sessions[split], spec, problems, past, label))
    except RunInterrupted as stop:
        end_line()
        if stop.run["problems"]:
            runs.append(stop.run)
        if not runs:  # nothing to keep: the folder is left as it was
            note(f"{interrupts.describe(stop.stop)}: no problem had finished; nothing was written")
        elif _finish(folder, config, runs, args.no_plots):
            note(f"{interrupts.describe(stop.stop)}: wrote {len(runs)} run(s) to {folder.path}")
        return interrupts.exit_code(stop.stop)  # 130 Ctrl-C, 143 SIGTERM, 129 a closed terminal
    finally:
        for session in sessions.values():
            session.close()
    return 0 if _finish(folder, config, runs, args.no_plots) else 1


def _run(
    folder: OutFolder,
    config: dict,
    runs: list[dict],
    session: Session,
    spec: RunSpec,
    problems: list[Problem],
    past: dict,
    label: str,
) -> dict:
    """One spec's run: an earlier bench's where it ran whole; else its problems that did not finish
    there, saved after each one, and recorded with those that did."""
    earlier = past.get(spec_id(spec))
    if earlier and not earlier["interrupted"]:
        return earlier
    finished = {pp["id"] for pp in earlier["per_problem"]} if earlier else set()
    whole: Callable[[dict], dict] = (lambda run: merge_runs(earlier, run)) if earlier else (lambda run: run)
    todo = [p for p in problems if p.id not in finished]
    try:
        run = run_one(session, spec, todo, bar(label), lambda part: folder.save(config, [*runs, whole(part)]))
    except RunInterrupted as stop:
        stop.run = whole(stop.run)
        raise
    end_line()
    return whole(run)


def _finish(folder: OutFolder, config: dict, runs: list[dict], no_plots: bool) -> bool:
    """Save, print the table (whether or not the save worked) and draw the plots; whether the
    results are written."""
    saved = folder.save(config, runs)
    print_table(runs, sys.stdout)
    print_examples(runs, sys.stdout)
    if graded := sum(run.get("graded_as_text", 0) for run in runs):
        as_text = f"{graded} problem(s) were graded as text after the grading budget ran out"
        note(f"edgereason: note: {as_text}")
    if not no_plots and saved:
        from edgereason.bench.plots import write_plots  # matplotlib only when plots are drawn

        try:
            write_plots(folder.path, runs)
        except OSError as e:  # a folder in the way, a full disk: the results are written, so a note
            note(f"edgereason: note: the plots were not written ({e.strerror}: {e.filename})")
    if saved:
        note(f"results in {folder.path}/results.json")
        return True
    held = f"holds the {folder.saved_problems} problem(s) saved before" if folder.saved_problems else "is not there"
    why = folder.unsaved.strerror if folder.unsaved else "?"
    unwritten = f"the results could not be written to {folder.path} ({why})"
    note(f"edgereason: error: {unwritten}; its results.json {held}")
    return False


def _check_problems_fit(session: Session, problems: list[Problem], dataset: str) -> None:
    """Every problem fits the session's generator (its trained context and KV memory), before the
    first run."""
    for p in problems:
        try:
            prompt_ids(session.generator, p.problem)
        except ConfigError as e:
            raise ConfigError(f"{dataset}: problem {p.id!r}: {e}") from None
