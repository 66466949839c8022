"""What `solve` and `chat` search: the generator's recipe for the device the session will use fills the flags the
user left unset (search/recipes.py decides what fills what), the recipe's PRM is pulled, and the flags the search
has no use for are named."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from edgereason import models
from edgereason.backends import load_backend
from edgereason.cli.common import TREE_FLAGS, search_config
from edgereason.cli.progress import end_line, pull_progress
from edgereason.config import SearchConfig
from edgereason.errors import ModelError
from edgereason.search.recipes import PLAIN, Device, Recipe, fill_unset, picks_verifier, recipe_for
from edgereason.session.gpu import default_gpu_layers


class RecipeUse(NamedTuple):
    recipe: Recipe
    filled: tuple[str, ...]  # the flags the recipe set: the user left them unset
    tree_flags: tuple[str, ...]  # the TREE_FLAGS the user set


class SearchChoice(NamedTuple):
    """What `solve` and `chat` run, and the flags the user gave that it has no use for (best-of-n has no tree)."""

    config: SearchConfig
    unused: tuple[str, ...]

    def note(self) -> str | None:
        """One line saying which flags went unused, or None where all were used."""
        if not self.unused:
            return None
        flags = " and ".join(f"--{f}" for f in self.unused)
        return (
            f"note: {self.config.strategy} ran, which has no use for {flags} (beam and dvts read them; add "
            f"--strategy beam)"
        )


def recipe_device(args: argparse.Namespace) -> Device:
    """Where the generator's layers will run, as the session decides it (edgereason/session/gpu.py); a served
    generator has no recipe, so no device to ask."""
    if args.backend == "remote":
        return "cpu"
    if args.gpu_layers is not None:
        return "gpu" if args.gpu_layers > 0 else "cpu"
    runtime = load_backend("torch" if args.backend == "torch" else "llamacpp")
    return "gpu" if default_gpu_layers(runtime) > 0 else "cpu"


def apply_recipe(args: argparse.Namespace, device: Device) -> RecipeUse:
    """Fill the search and PRM flags left unset (None) from the generator's recipe for this device
    (search/recipes.py's rule); the tree flags left unset take SearchConfig's defaults."""
    recipe = recipe_for(args.model, device, picks_verifier(args.prm, args.prm_format, args.prm_head, args.backend))
    fill = fill_unset(recipe, vars(args), TREE_FLAGS)
    vars(args).update(fill.values)
    return RecipeUse(recipe, fill.filled, fill.tree_flags)


def recipe_search_config(
    args: argparse.Namespace, resolve: Callable[..., Path] = models.resolve, device: Device | None = None
) -> SearchChoice:
    """The search of `solve` and `chat`: the recipe applied and the flags checked (a typo costs no download), then
    the recipe's PRM pulled. Where it cannot be (offline, say), the plain recipe runs, with a note: what is on disk
    keeps working. device: None = where the session will put the layers."""
    use = apply_recipe(args, device or recipe_device(args))
    config = search_config(args)
    if "prm" in use.filled:
        try:
            resolve(use.recipe.prm, progress=pull_progress, role="PRM")
        except ModelError as e:
            end_line()
            print(
                f"note: {e}\nnote: running {PLAIN.strategy} with the generator's own weights as PRM instead, "
                f"until {use.recipe.prm} is on disk",
                file=sys.stderr,
            )
            for f in use.filled:
                setattr(args, f, getattr(PLAIN, f))
            config = search_config(args)
    return SearchChoice(config, () if config.grows_tree else use.tree_flags)
