"""The shared flags' conversion into settings (the flags themselves: flags_models, flags_remote,
flags_search): the models of every command, and what `solve` and `chat` run."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import NamedTuple

from edgereason.cli.flags_remote import remote_settings
from edgereason.cli.flags_search import check_beams, policy_from
from edgereason.cli.recipe_use import recipe_search_config
from edgereason.engine.policy import Policy
from edgereason.memory import parse_size
from edgereason.memory.size import size_unit
from edgereason.search.recipes import SearchChoice
from edgereason.session.settings import ModelSettings


def model_settings(args: argparse.Namespace) -> ModelSettings:
    served = args.backend == "remote"  # --backend read once: a server, or a local runtime
    # "" is a mistake, not unset
    budget = parse_size(args.kv_budget) if args.kv_budget is not None else None
    return ModelSettings(
        model=args.model,
        prm=args.prm,
        prm_format=args.prm_format,
        prm_head=args.prm_head,
        prm_device=args.prm_device,
        threads=args.threads,
        generator_kv_tokens=args.kv_tokens,
        verifier_kv_tokens=args.kv_tokens,
        kv_budget_bytes=budget,
        split=args.split,
        flash_attn=args.flash_attn,
        n_gpu_layers=args.gpu_layers,
        verbose=args.verbose,
        gpu_memory_bytes=parse_size(args.gpu_memory) if args.gpu_memory is not None else None,
        device_sampling=args.device_sampling,
        device_top_k=args.device_top_k,
        torch_weights=args.torch_weights,
        kv_budget_unit=size_unit(args.kv_budget) if budget is not None else "MiB",
        remote=remote_settings(args, served),
        backend="auto" if served else args.backend,
    )


class SolveSettings(NamedTuple):
    """What the flags of `solve` and `chat` ask for, made typed once: the search, the models, the
    policy."""

    search: SearchChoice
    models: ModelSettings
    policy: Policy


def solve_settings(args: argparse.Namespace) -> SolveSettings:
    """The flags as settings: the recipe for the models fills the unset search flags, and more
    beams than a local generator runs are refused before any model loads."""
    models = model_settings(args)
    choice = recipe_search_config(args, models)
    models = replace(models, prm=choice.prm)  # the recipe's PRM where it named one
    check_beams(choice.config.beams, models)
    return SolveSettings(choice, models, policy_from(args))
