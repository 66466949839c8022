"""The search and engine-policy flags of solve, chat and bench."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from edgereason.config import (
    AGGREGATIONS,
    SELECTS,
    STRATEGY_NAMES,
    VOTES,
    SamplingParams,
    SearchConfig,
)
from edgereason.engine.policy import (
    PRESETS,
    SWITCH_HELP,
    SWITCH_METAVAR,
    Policy,
    parse_policy,
    with_switches,
)
from edgereason.errors import ConfigError
from edgereason.search.recipes import TREE_FLAGS, describe
from edgereason.session.auto_policy import EDGE_MAX_COST_8
from edgereason.session.settings import ModelSettings

# the sequences a local generator runs at once, one a beam: llama.cpp's LLAMA_MAX_SEQ, and the torch
# backend's SEQ_SLOTS as its (a test holds them equal); a served generator's are the server's
LOCAL_MAX_BEAMS = 256


def add_search_args(
    p: argparse.ArgumentParser,
    from_recipe: bool = False,
    strategy: str = SearchConfig.strategy,
    strategy_help: str = "search strategy",
    beams: bool = True,
) -> None:
    """from_recipe: --strategy, --vote, --beams and --temperature default to the generator's
    recipe, and --width and --select are left unset so that a note can say when the search has no
    use for them (search/recipes.py's choose_search fills them all); else `strategy`, a majority
    vote, and SearchConfig's and SamplingParams' defaults (config.py). beams=False: the command adds
    its own flag for `args.beams`."""
    g = p.add_argument_group("search")
    g.add_argument(
        "--strategy",
        default=None if from_recipe else strategy,
        choices=STRATEGY_NAMES,
        help=f"{strategy_help} (default {_default_help('strategy', strategy, from_recipe)}; "
        "README: The verifier)",
    )
    if beams:
        g.add_argument(
            "--beams",
            type=beam_count,
            default=None if from_recipe else SearchConfig.beams,
            metavar="N",
            help="candidates N: the beam size, or the samples of best-of-n "
            f"(default {_default_help('beams', SearchConfig.beams, from_recipe)})",
        )
    g.add_argument(
        "--width",
        type=int,
        default=None if from_recipe else TREE_FLAGS["width"],
        help="beam width M: children per kept candidate, for beam and dvts (default "
        f"{TREE_FLAGS['width']})",
    )
    _add_length_flags(g)
    _add_sampling_flags(g, from_recipe)
    _add_scoring_flags(g, from_recipe)


def _default_help(field: str, value: object, from_recipe: bool) -> str:
    """A flag's default as its help states it: the recipe's, or `value`."""
    return f"the recipe: {describe(field)}" if from_recipe else str(value)


def _add_length_flags(g: argparse._ArgumentGroup) -> None:
    """How long a path may grow: steps, tokens a step, tokens in all."""
    g.add_argument(
        "--max-steps",
        type=int,
        default=SearchConfig.max_steps,
        help="reasoning steps per path (default %(default)s)",
    )
    g.add_argument(
        "--max-step-tokens",
        type=int,
        default=SearchConfig.max_step_tokens,
        help="tokens per step (default %(default)s)",
    )
    g.add_argument(
        "--max-tokens",
        type=int,
        default=SearchConfig.max_path_tokens,
        help="generated tokens per path (default %(default)s)",
    )


def _add_sampling_flags(g: argparse._ArgumentGroup, from_recipe: bool) -> None:
    """How the generator samples."""
    g.add_argument(
        "--temperature",
        type=float,
        default=None if from_recipe else SamplingParams.temperature,
        help="sampling temperature, 0 = greedy (default "
        f"{_default_help('temperature', SamplingParams.temperature, from_recipe)})",
    )
    g.add_argument(
        "--top-p",
        type=float,
        default=SamplingParams.top_p,
        help="nucleus sampling (default %(default)s)",
    )
    g.add_argument(
        "--seed", type=int, default=SamplingParams.seed, help="random seed (default %(default)s)"
    )


def _add_scoring_flags(g: argparse._ArgumentGroup, from_recipe: bool) -> None:
    """How paths are scored, kept and voted on."""
    g.add_argument(
        "--agg",
        default=SearchConfig.aggregation,
        choices=AGGREGATIONS,
        help="step-score aggregation (default %(default)s)",
    )
    g.add_argument(
        "--select",
        default=None if from_recipe else TREE_FLAGS["select"],
        choices=SELECTS,
        help="which candidates a beam step keeps: the best-scored (top), or each kept parent's "
        "best first, then the rest, a step repeated last (diverse: lineages kept apart; default "
        f"{TREE_FLAGS['select']})",
    )
    g.add_argument(
        "--vote",
        default=None if from_recipe else "majority",
        choices=VOTES,
        help="final answer: the best-scored path, the answer with the largest sum of path scores "
        "(weighted), or the one most paths reach, ties to the better-scored (default "
        f"{_default_help('vote', 'majority', from_recipe)})",
    )


def beam_count(text: str) -> int:
    """One beam size: `bench --beams` takes a comma list, a single search takes one number and says
    so."""
    if "," in text:
        raise argparse.ArgumentTypeError(
            f"one search takes one beam size, got {text!r}; a list of sizes is for `edgereason "
            "bench --beams`"
        )
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number, got {text!r}") from None


def add_policy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy",
        default="auto",
        help=f"engine policy PRESET[:key=value...]; presets: {', '.join(PRESETS)}; auto = edge "
        f"where a forward pass of 8 rows costs under {EDGE_MAX_COST_8}x one row on this device (a "
        "GPU), else baseline (default auto)",
    )
    add_switch_args(p)


def add_switch_args(p: argparse.ArgumentParser) -> None:
    """One flag per technique switch; a given flag overrides the preset's value."""
    g = p.add_argument_group("policy switches (override the preset)")
    for f in fields(Policy):
        if f.name == "name":
            continue
        flag, dest, help_text = (
            "--" + f.name.replace("_", "-"),
            f"switch_{f.name}",
            SWITCH_HELP[f.name],
        )
        if "bool" in str(f.type):
            g.add_argument(
                flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        elif f.name == "order":
            g.add_argument(
                flag, dest=dest, choices=["prefix", "fifo"], default=None, help=help_text
            )
        else:
            kind = float if "float" in str(f.type) else int
            g.add_argument(
                flag,
                dest=dest,
                type=kind,
                default=None,
                metavar=SWITCH_METAVAR[f.name],
                help=help_text,
            )


def check_beams(beams: int, models: ModelSettings) -> None:
    """ConfigError for more beams than a local generator runs at once, before its model loads (the
    engine's own check came only after the model's load, tens of seconds for the 1.5B)."""
    if beams > LOCAL_MAX_BEAMS and not models.served_generator:
        most = f"{LOCAL_MAX_BEAMS} sequences, one a beam"
        pick = f"pick --beams {LOCAL_MAX_BEAMS} or fewer"
        raise ConfigError(
            f"--beams {beams} is more than a local generator runs at once: {most}; {pick}"
        )


def policy_from(args: argparse.Namespace, spec: str | None = None) -> Policy:
    """The policy `--policy` (or `spec`) names, with the switches given changed."""
    changes = {
        k[len("switch_") :]: v
        for k, v in vars(args).items()
        if k.startswith("switch_") and v is not None
    }
    return with_switches(parse_policy(spec if spec is not None else args.policy), changes)


def search_config(flags: Mapping[str, Any]) -> SearchConfig:
    """The search the flags' values name (`vars(args)`, or those values with a recipe's)."""
    return SearchConfig(
        strategy=flags["strategy"],
        beams=flags["beams"],
        width=flags["width"],
        max_steps=flags["max_steps"],
        max_step_tokens=flags["max_step_tokens"],
        max_path_tokens=flags["max_tokens"],
        aggregation=flags["agg"],
        vote=flags["vote"],
        select=flags["select"],
        sampling=SamplingParams(
            temperature=flags["temperature"], top_p=flags["top_p"], seed=flags["seed"]
        ),
    )
