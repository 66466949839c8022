"""What `solve` and `chat` run when the user names no search or PRM: per generator, the most accurate search
measured at about a minute a problem on a CPU and seconds on a GPU (README, "Which search answers best").

A recipe is taken whole or not at all: it was measured as one setting. Any PRM flag (`--prm`, `--prm-format`,
`--prm-head`) or a remote backend means the user picks the verifier, and the plain recipe applies; `--strategy` and
`--vote` always override. Where the recipe's PRM cannot be had (offline), the plain recipe runs
(edgereason/cli/common.py: recipe_search_config).
"""

from __future__ import annotations

from dataclasses import dataclass

from edgereason.config import STRATEGIES, VOTES


@dataclass(frozen=True)
class Recipe:
    prm: str | None  # registry name of the PRM's weights; None: the generator's own
    strategy: str
    vote: str

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES or self.vote not in VOTES:
            raise ValueError(f"recipe names an unknown strategy or vote: {self}")


# Any generator: eight samples and a majority vote beat PRM-guided beam search with the generator's own weights
# as the PRM (200 GSM8K test problems: qwen2.5-coder-0.5b 35.0% against 28.0%, qwen2.5-coder-1.5b 69.5% against
# 63.0%, where the head's weighted vote picks what the majority picks).
PLAIN = Recipe(prm=None, strategy="best-of-n", vote="majority")

RECIPES: dict[str, Recipe] = {
    # beam N=8 judged by the 1.5B's head for the 0.5B: 36.0% against 25.0% and 33.5% (best-of-8, two seeds) and
    # 26.5% greedy, on one H200; 54.5 s a problem against 57.5 s for PLAIN on 2 CPU cores
    "qwen2.5-coder-0.5b": Recipe(prm="qwen2.5-coder-1.5b", strategy="beam", vote="weighted"),
}


def describe(field: str) -> str:
    """A field's default across the recipes, for --help: e.g. 'beam for qwen2.5-coder-0.5b, else best-of-n'."""
    named = ", ".join(f"{getattr(r, field)} for {generator}" for generator, r in RECIPES.items())
    return f"{named}, else {getattr(PLAIN, field) or 'self'}"


def recipe_for(generator: str, prm_chosen: bool) -> Recipe:
    """The generator's recipe (by registry name), or PLAIN where it has none or the user chose the PRM."""
    return PLAIN if prm_chosen else RECIPES.get(generator, PLAIN)
