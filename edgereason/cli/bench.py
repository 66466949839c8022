"""`edgereason bench`: speed and accuracy of engine policies on a JSONL math set, or `--compare` of two results.

Runs of different policies (and KV splits) alternate (A B A B over repeats) so machine drift hits all of them
alike; the models are opened once per split and each run gets a fresh engine.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from edgereason import __version__
from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.bench.arrivals import parse_rate
from edgereason.bench.report import prepare_out, print_compare, print_table, write_results
from edgereason.bench.runner import RunInterrupted, RunSpec, rate_label, run_one
from edgereason.cli.comma_lists import beam_size, comma_items, comma_values
from edgereason.cli.common import model_settings, policy_from, search_config
from edgereason.cli.flags_models import add_model_args
from edgereason.cli.flags_search import add_search_args, add_switch_args
from edgereason.cli.progress import bar, end_line, pull_progress
from edgereason.config import STRATEGY_NAMES
from edgereason.engine.loop import prompt_ids
from edgereason.engine.policy import PRESETS, Policy
from edgereason.errors import ConfigError
from edgereason.search.dataset import Problem, load_problems
from edgereason.session.opening import Session, open_session
from edgereason.session.settings import SPLITS
from edgereason.util import interrupts


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="measure speed and accuracy of engine policies on a JSONL math set",
        conflict_handler="resolve",
        description="Run each policy over the problems of a JSONL file (id, problem, answer) and "
        "write results.json, results.csv and plots; or compare two result folders.",
    )
    _add_workload_flags(p)
    _add_output_flags(p)
    add_model_args(p)
    add_search_args(p)
    add_switch_args(p)
    _add_side_by_side_flags(p)
    p.set_defaults(func=run)


def _add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The problems, the policies, and how requests arrive."""
    p.add_argument("--dataset", help="JSONL file, one {id, problem, answer} object a line")
    p.add_argument("--limit", type=int, default=None, help="problems to run (default all)")
    p.add_argument("--offset", type=int, default=0, help="problems to skip first (default 0)")
    p.add_argument(
        "--policies",
        default="baseline,edge",
        help=f"comma list of PRESET[:key=value...]; presets: {', '.join(PRESETS)} (default baseline,edge)",
    )
    p.add_argument(
        "--rate",
        default="inf",
        help="comma list of arrival rates in requests/s (Poisson), inf = all at once (default inf)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="most requests in flight at once; later arrivals wait, 1 = one at a time like a chat user "
        "(default 0: no limit)",
    )
    p.add_argument("--repeat", type=int, default=1, help="repetitions of every run, interleaved (default 1)")


def _add_output_flags(p: argparse.ArgumentParser) -> None:
    """Where the results go, or which two to compare."""
    p.add_argument("--out", help="folder for results.json, results.csv and plots; checked before the first problem")
    p.add_argument("--force", action="store_true", help="overwrite the results of an earlier bench in --out")
    p.add_argument("--no-plots", action="store_true", help="write results.json and results.csv only")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("BASE", "NEW"),
        help="print ratios NEW / BASE between two result folders, matching runs by policy/beams/rate",
    )


def _add_side_by_side_flags(p: argparse.ArgumentParser) -> None:
    """--beams, --strategy and --split as comma lists of configurations run side by side."""
    # replace the shared single-valued --beams and --strategy (conflict_handler="resolve")
    p.add_argument(
        "--beams",
        default="4",
        metavar="N[,N...]",
        help="beam size N, or a comma list of sizes run side by side (default 4)",
    )
    p.add_argument(
        "--strategy",
        default="beam",
        metavar="S[,S...]",
        help=f"search strategy ({', '.join(STRATEGY_NAMES)}), or a comma list run side by side: with "
        "--beams, one accuracy-against-compute point per strategy and N (default beam)",
    )
    p.add_argument(
        "--split",
        default="profile",
        help="comma list of ways to split --kv-budget: profile, even; several run side by side (default profile)",
    )


def run(args: argparse.Namespace) -> int:
    if args.compare:
        print_compare(*args.compare, file=sys.stdout, notes=sys.stderr)
        return 0
    _check_counts(args)
    problems = load_problems(args.dataset, args.limit, args.offset)
    policies = [policy_from(args, s) for s in comma_items(args.policies, "--policies")]
    beams = comma_values(args.beams, "--beams", beam_size)
    strategies = comma_items(args.strategy, "--strategy", allowed=STRATEGY_NAMES)
    rates = comma_values(args.rate, "--rate", parse_rate)
    splits = comma_items(args.split, "--split", allowed=SPLITS)
    _check_splits(args, splits)
    if not args.no_plots:
        require_one_cxx_runtime("bench's plots load matplotlib", "pass --no-plots")
    specs = _run_specs(args, policies, beams, strategies, rates, splits)
    out = Path(args.out)
    prepare_out(out, args.force)  # after every setting is checked: a refused bench leaves no folder behind
    config = _config(args, problems, policies, beams, rates)
    return _run_all(args, out, config, problems, specs, splits)


def _check_counts(args: argparse.Namespace) -> None:
    """The flags a bench cannot run without, and the counts that must be positive."""
    if not args.dataset or not args.out:
        raise ConfigError("bench needs --dataset FILE.jsonl and --out DIR (or --compare BASE NEW)")
    if args.repeat <= 0:
        raise ConfigError(f"--repeat must be a positive number, got {args.repeat}")
    if args.concurrency < 0:
        raise ConfigError(f"--concurrency must be 0 (no limit) or more, got {args.concurrency}")


def _check_splits(args: argparse.Namespace, splits: list[str]) -> None:
    if len(splits) > 1 and args.kv_budget is None and args.gpu_memory is None:
        # without a budget each model gets --kv-tokens: the runs would be alike, labelled as different splits
        raise ConfigError(
            f"--split {args.split} compares ways to split a KV budget; give --kv-budget SIZE (or "
            "--gpu-memory SIZE), or one --split"
        )


def _run_specs(
    args: argparse.Namespace,
    policies: list[Policy],
    beams: list[int],
    strategies: list[str],
    rates: list[float],
    splits: list[str],
) -> list[tuple[str, RunSpec]]:
    """Every run, each with its KV split, in the interleaved order they run in."""
    # with several strategies or splits the label names them, so tables, plots and --compare keep runs apart
    return [
        (
            split,
            RunSpec(
                policy,
                search_config(argparse.Namespace(**{**vars(args), "beams": b, "strategy": strategy})),
                rate,
                rep,
                args.seed + rep,
                args.concurrency,
                label=policy.name
                + (f"/{strategy}" if len(strategies) > 1 else "")
                + (f"@{split}" if len(splits) > 1 else ""),
            ),
        )
        for rep in range(args.repeat)
        for rate in rates
        for strategy in strategies
        for b in beams
        for policy in policies
        for split in splits
    ]  # splits alternate like policies


def _run_all(
    args: argparse.Namespace,
    out: Path,
    config: dict,
    problems: list[Problem],
    specs: list[tuple[str, RunSpec]],
    splits: list[str],
) -> int:
    """Opens one session per split, runs every spec, and writes the results after each run and at the end."""
    runs: list[dict] = []
    sessions = {
        s: open_session(model_settings(argparse.Namespace(**{**vars(args), "split": s})), progress=pull_progress)
        for s in splits
    }
    config["backend"] = next(iter(sessions.values())).backend  # auto's choice: the same for every split
    try:
        for session in sessions.values():  # a problem refused mid-run stopped the bench and lost that run's work
            _check_problems_fit(session, problems, args.dataset)
        for i, (split, spec) in enumerate(specs, 1):
            label = f"[{i}/{len(specs)}] {spec.name} N={spec.config.beams} rate={rate_label(spec.rate)}"
            runs.append(run_one(sessions[split], spec, problems, bar(label)))
            end_line()
            write_results(out, config, runs)
    except RunInterrupted as stop:
        end_line()
        if stop.run["problems"]:
            runs.append(stop.run)
        _finish(out, config, runs, args.no_plots)
        print(f"{interrupts.describe(stop.stop)}: wrote {len(runs)} run(s) to {out}", file=sys.stderr)
        return interrupts.exit_code(stop.stop)  # 130 for Ctrl-C, 143 for SIGTERM, 129 for a closed terminal
    finally:
        for session in sessions.values():
            session.close()
    _finish(out, config, runs, args.no_plots)
    return 0


def _finish(out: Path, config: dict, runs: list[dict], no_plots: bool) -> None:
    write_results(out, config, runs)
    print_table(runs, sys.stdout)
    if not no_plots:
        from edgereason.bench.plots import write_plots  # matplotlib only when plots are drawn

        try:
            write_plots(out, runs)
        except OSError as e:  # a folder in the way, a full disk: the results are written, so a note, not an error
            print(f"edgereason: note: the plots were not written ({e.strerror}: {e.filename})", file=sys.stderr)
    print(f"results in {out}/results.json", file=sys.stderr)


def _check_problems_fit(session: Session, problems: list[Problem], dataset: str) -> None:
    """Every problem fits the session's generator (its trained context and KV memory), before the first run."""
    for p in problems:
        try:
            prompt_ids(session.generator, p.problem)
        except ConfigError as e:
            raise ConfigError(f"{dataset}: problem {p.id!r}: {e}") from None


def _config(
    args: argparse.Namespace, problems: list, policies: list[Policy], beams: list[int], rates: list[float]
) -> dict:
    return {
        "version": __version__,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": str(args.dataset),
        "offset": args.offset,
        "limit": args.limit,
        "problems": len(problems),
        "policies": [p.name for p in policies],
        "beams": beams,
        "rates": [rate_label(r) for r in rates],
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "model": args.model,
        "prm": args.prm,
        "base_url": args.base_url,  # the servers of a served generator and PRM
        "prm_base_url": args.prm_base_url,
        "prm_format": args.prm_format,
        "threads": args.threads,
        "kv_tokens": args.kv_tokens,
        "kv_budget": args.kv_budget,
        "split": args.split,
        "strategy": args.strategy,
        "width": args.width,
        "max_steps": args.max_steps,
        "max_step_tokens": args.max_step_tokens,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "seed": args.seed,
        "agg": args.agg,
        "vote": args.vote,
        "select": args.select,
    }
