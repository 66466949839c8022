"""What `solve` and `chat` search: the flags mapped onto the generator's recipe for the device the
session will use (search/recipes.py's choose_search decides what fills what, and pulls the
recipe's PRM), and the note printed where that PRM cannot be had."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from edgereason import models
from edgereason.cli.flags_search import search_config
from edgereason.cli.progress import end_line, pull_progress
from edgereason.errors import ModelError
from edgereason.search.recipes import (
    PLAIN,
    Device,
    SearchChoice,
    choose_search,
    picks_verifier,
    recipe_for,
)
from edgereason.session.gpu import recipe_device
from edgereason.session.settings import ModelSettings


def recipe_search_config(
    args: argparse.Namespace,
    settings: ModelSettings,
    resolve: Callable[..., Path] = models.resolve,
    device: Device | None = None,
) -> SearchChoice:
    """The search of `solve` and `chat`: the search flags (args, read, not changed) on the recipe
    for the models of `settings`. device: None = where the session will put the layers."""
    device = device or recipe_device(settings)
    chosen = picks_verifier(
        settings.prm, settings.prm_format, settings.prm_head, settings.served_generator
    )
    recipe = recipe_for(settings.model, device, chosen)

    def offline(e: ModelError) -> None:
        end_line()
        instead = f"running {PLAIN.strategy} with the generator's own weights as PRM instead"
        print(f"note: {e}\nnote: {instead}, until {recipe.prm} is on disk", file=sys.stderr)

    def pull(name: str) -> Path:
        return resolve(name, progress=pull_progress, role="PRM")

    return choose_search(recipe, vars(args), search_config, pull, offline)
