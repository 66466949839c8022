"""`edgereason bench`'s flags: speed and accuracy of engine policies on a JSONL math set, or
`--compare` of two results (edgereason/evaluation/ runs them).

Runs of different policies (and KV splits) alternate (A B A B over repeats) so machine drift hits
all of them alike; the models are opened once per split and each run gets a fresh engine."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from edgereason import __version__
from edgereason.backends.cxx_runtime import require_one_cxx_runtime
from edgereason.cli.comma_lists import beam_size, comma_items, comma_values
from edgereason.cli.common import model_settings
from edgereason.cli.flags_models import add_model_args
from edgereason.cli.flags_search import (
    add_search_args,
    add_switch_args,
    check_beams,
    policy_from,
    search_config,
)
from edgereason.cli.help import brief
from edgereason.cli.progress import bar, end_line, pull_progress
from edgereason.config import STRATEGY_NAMES
from edgereason.engine.policy import PRESETS, Policy
from edgereason.errors import ConfigError
from edgereason.evaluation.arrivals import parse_rate
from edgereason.evaluation.plan import BenchSettings, RunGrid, run_specs
from edgereason.evaluation.report import print_compare
from edgereason.evaluation.resume import PROBLEMS_SHA256, problems_sha256
from edgereason.evaluation.runner import rate_label
from edgereason.evaluation.session_runs import Display, run_bench
from edgereason.search.dataset import Problem, load_problems
from edgereason.session.backend_rule import bench_workload
from edgereason.session.settings import SPLITS
from edgereason.util import startup
from edgereason.util.secrets import hide_credentials


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
    brief(p, "bench")
    p.set_defaults(func=run)


def _add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The problems, the policies, and how requests arrive."""
    p.add_argument("--dataset", help="JSONL file, one {id, problem, answer} object a line")
    p.add_argument("--limit", type=int, default=None, help="problems to run (default all)")
    p.add_argument("--offset", type=int, default=0, help="problems to skip first (default 0)")
    p.add_argument(
        "--policies",
        default="baseline,edge",
        help=f"comma list of PRESET[:key=value...]; presets: {', '.join(PRESETS)} (default "
        "baseline,edge)",
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
        help="most requests in flight at once; later arrivals wait, 1 = one at a time like a chat "
        "user (default 0: no limit)",
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="repetitions of every run, interleaved (default 1)"
    )


def _add_output_flags(p: argparse.ArgumentParser) -> None:
    """Where the results go, or which two to compare."""
    p.add_argument(
        "--out",
        help="folder for results.json, results.csv and plots; checked before the first problem",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite the results of an earlier bench in --out"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted bench in --out from its finished problems (the same flags)",
    )
    p.add_argument(
        "--no-plots", action="store_true", help="write results.json and results.csv only"
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("BASE", "NEW"),
        help="print ratios NEW / BASE between two result folders, matching runs by "
        "policy/beams/rate",
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
        help=f"search strategy ({', '.join(STRATEGY_NAMES)}), or a comma list run side by side: "
        "with --beams, one accuracy-against-compute point per strategy and N (default beam)",
    )
    p.add_argument(
        "--split",
        default="profile",
        help="comma list of ways to split --kv-budget: profile, even; several run side by side "
        "(default profile)",
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
    models = model_settings(argparse.Namespace(**{**vars(args), "split": splits[0]}))
    models = replace(models, workload=bench_workload(args.concurrency, len(problems)))
    check_beams(max(beams), models)
    if not args.no_plots:
        require_one_cxx_runtime("bench's plots load matplotlib", "pass --no-plots")
    first = {"beams": beams[0], "strategy": strategies[0]}  # each run's replace these
    search = search_config({**vars(args), **first})
    grid = RunGrid(
        policies=policies,
        beams=beams,
        strategies=strategies,
        rates=rates,
        splits=splits,
        repeat=args.repeat,
        seed=args.seed,
        concurrency=args.concurrency,
        search=search,
    )
    specs = run_specs(grid)
    settings = BenchSettings(
        models=models,
        out=Path(args.out),
        force=args.force,
        resume=args.resume,
        plots=not args.no_plots,
        dataset="stdin" if args.dataset == "-" else args.dataset,
    )
    config = _config(args, problems, policies, beams, rates)
    code = run_bench(settings, config, problems, specs, Display(note, bar, end_line, pull_progress))
    if models.verbose:  # after the runs: graphs, compiles and first passes come in them
        note(f"edgereason: {startup.summary()}")
    return code


def note(line: str) -> None:
    """A note on stderr, under an open progress bar rather than onto its end."""
    end_line()
    print(line, file=sys.stderr)


def _check_counts(args: argparse.Namespace) -> None:
    """The flags a bench cannot run without, and the counts that must be positive."""
    if not args.dataset or not args.out:
        raise ConfigError("bench needs --dataset FILE.jsonl and --out DIR (or --compare BASE NEW)")
    if args.repeat <= 0:
        raise ConfigError(f"--repeat must be a positive number, got {args.repeat}")
    if args.concurrency < 0:
        raise ConfigError(f"--concurrency must be 0 (no limit) or more, got {args.concurrency}")
    if args.resume and args.force:
        raise ConfigError(
            "--resume continues the results in --out and --force overwrites them; pass one"
        )


def _check_splits(args: argparse.Namespace, splits: list[str]) -> None:
    if len(splits) > 1 and args.kv_budget is None and args.gpu_memory is None:
        # without a budget each model gets --kv-tokens: the runs would be alike, labelled as
        # different splits
        raise ConfigError(
            f"--split {args.split} compares ways to split a KV budget; give --kv-budget SIZE (or "
            "--gpu-memory SIZE), or one --split"
        )


def _config(
    args: argparse.Namespace,
    problems: list[Problem],
    policies: list[Policy],
    beams: list[int],
    rates: list[float],
) -> dict:
    return {
        "version": __version__,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": str(args.dataset),
        "offset": args.offset,
        "limit": args.limit,
        "problems": len(problems),
        PROBLEMS_SHA256: problems_sha256(problems),
        "policies": [p.name for p in policies],
        "beams": beams,
        "rates": [rate_label(r) for r in rates],
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "model": args.model,
        "prm": args.prm,
        # the servers of a served generator and PRM, credentials as ***
        "base_url": hide_credentials(args.base_url) if args.base_url else None,
        "prm_base_url": hide_credentials(args.prm_base_url) if args.prm_base_url else None,
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
