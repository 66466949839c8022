"""What `solve` and `chat` run when the user names no search or PRM: per generator and device, the
most accurate search measured at seconds a problem on a GPU and about a minute on a CPU (README,
"Which search answers best").

A recipe is taken whole or not at all: it was measured as one setting. Any PRM flag (`--prm`,
`--prm-format`, `--prm-head`) or a remote backend means the user picks the verifier, and the plain
recipe applies; the search flags (`--strategy`, `--vote`, `--beams`, `--temperature`) always
override. Where the recipe's PRM cannot be had (offline), the plain recipe runs (choose_search;
cli/recipe_use.py maps the flags). `--width` and `--select` shape a tree search only: where
best-of-n runs, `solve` and `chat` say which of them were given to no use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from edgereason.config import STRATEGY_NAMES, VOTES, SamplingParams, SearchConfig
from edgereason.errors import ModelError

Device = Literal["cpu", "gpu"]
# the flags a recipe fills where they are unset
FIELDS = ("strategy", "vote", "prm", "beams", "temperature")
# flags only beam and dvts read, with SearchConfig's defaults
TREE_FLAGS = {f: getattr(SearchConfig, f) for f in ("width", "select")}


@dataclass(frozen=True)
class Recipe:
    prm: str | None  # registry name of the PRM's weights; None: the generator's own
    strategy: str
    vote: str
    beams: int = 8
    temperature: float = SamplingParams.temperature

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGY_NAMES or self.vote not in VOTES:
            raise ValueError(f"recipe names an unknown strategy or vote: {self}")
        if self.beams < 1 or not self.temperature >= 0:
            raise ValueError(f"recipe needs beams >= 1 and a temperature >= 0: {self}")


# Any generator: eight samples and a majority vote beat PRM-guided beam search with the generator's
# own weights as the PRM, for both generators (docs/results.md, "Earlier experiments"), and the
# head's weighted vote picks what the majority picks.
PLAIN = Recipe(prm=None, strategy="best-of-n", vote="majority")

# The 1.5B: best-of-8 at T 0.6 answers best of its searches, in seconds a problem on a GPU; on a
# CPU, where eight samples cost minutes, best-of-4 at T 0.4 (docs/results.md, "qwen2.5-coder-1.5b,
# the default generator")
_Q15_GPU = Recipe(prm=None, strategy="best-of-n", vote="weighted", beams=8, temperature=0.6)
_Q15_CPU = Recipe(prm=None, strategy="best-of-n", vote="weighted", beams=4, temperature=0.4)
# The 0.5B: beam N=8 M=4 judged by the 1.5B's head for the 0.5B, T 0.6, beats best-of-8 with the
# judge and greedy (docs/results.md, "qwen2.5-coder-0.5b")
_Q05 = Recipe(prm="qwen2.5-coder-1.5b", strategy="beam", vote="weighted", temperature=0.6)

RECIPES: dict[tuple[str, Device], Recipe] = {
    ("qwen2.5-coder-1.5b", "gpu"): _Q15_GPU,
    ("qwen2.5-coder-1.5b", "cpu"): _Q15_CPU,
    ("qwen2.5-coder-0.5b", "gpu"): _Q05,
    ("qwen2.5-coder-0.5b", "cpu"): _Q05,
}
assert {(g, d) for g, _ in RECIPES for d in ("gpu", "cpu")} <= RECIPES.keys(), (
    "a recipe for each device"
)


def describe(field: str) -> str:
    """A field's default across the recipes, for --help: e.g. 'best-of-n for qwen2.5-coder-1.5b,
    beam for qwen2.5-coder-0.5b, else best-of-n' (a value that differs by device is given for
    each)."""
    parts = []
    for generator in dict.fromkeys(g for g, _ in RECIPES):
        gpu, cpu = (_shown(RECIPES[generator, d], field) for d in ("gpu", "cpu"))
        parts.append(
            f"{gpu} for {generator}"
            if gpu == cpu
            else f"{gpu} on a GPU and {cpu} on a CPU for {generator}"
        )
    return f"{', '.join(parts)}, else {_shown(PLAIN, field)}"


def _shown(recipe: Recipe, field: str) -> str:
    value = getattr(recipe, field)
    return "self" if value is None else str(value)  # a PRM of None: the generator's own weights


def recipe_for(generator: str, device: Device, prm_chosen: bool) -> Recipe:
    """The generator's recipe on this device (by registry name), or PLAIN where it has none or the
    user chose the PRM."""
    return PLAIN if prm_chosen else RECIPES.get((generator, device), PLAIN)


def picks_verifier(prm: str | None, prm_format: str, prm_head: str | None, served: bool) -> bool:
    """Whether the user chose the verifier (any PRM flag, or a served generator): then the plain
    recipe applies."""
    return prm is not None or prm_format != "auto" or prm_head is not None or served


class RecipeFill(NamedTuple):
    # the recipe's fields the user left unset, and the tree flags' defaults where unset
    values: dict[str, Any]
    filled: tuple[str, ...]  # the recipe fields among them
    tree_flags: tuple[str, ...]  # the tree flags (width, select) the user gave


def fill_unset(
    recipe: Recipe, given: Mapping[str, Any], tree_defaults: Mapping[str, Any]
) -> RecipeFill:
    """What the recipe sets: each of its FIELDS the user left unset (None); unset tree flags get
    their defaults."""
    filled = tuple(f for f in FIELDS if given.get(f) is None and getattr(recipe, f) is not None)
    values = {f: getattr(recipe, f) for f in filled}
    values |= {f: v for f, v in tree_defaults.items() if given.get(f) is None}
    return RecipeFill(values, filled, tuple(f for f in tree_defaults if given.get(f) is not None))


@dataclass(frozen=True)
class SearchChoice:
    """What `solve` and `chat` run: the recipe, the search, the PRM (None: the generator's own
    weights) and the tree flags the user gave that it has no use for (best-of-n has no tree)."""

    recipe: Recipe
    config: SearchConfig
    prm: str | None
    unused: tuple[str, ...]

    def note(self) -> str | None:
        """One line saying which flags went unused, or None where all were used."""
        if not self.unused:
            return None
        flags = " and ".join(f"--{f}" for f in self.unused)
        no_use = f"{self.config.strategy} ran, which has no use for {flags}"
        return f"note: {no_use} (beam and dvts read them; add --strategy beam)"


def choose_search(
    recipe: Recipe,
    given: Mapping[str, Any],
    build: Callable[[Mapping[str, Any]], SearchConfig],
    pull: Callable[[str], object],
    offline: Callable[[ModelError], None],
) -> SearchChoice:
    """The recipe applied to the flags the user gave (`given`, None where unset) and the search
    `build` makes of them, checked before the recipe's PRM is pulled (a typo costs no download).
    Where `pull` cannot have it (offline, say), `offline` is told and the plain recipe's values
    take the recipe's place: what is on disk keeps working."""
    fill = fill_unset(recipe, given, TREE_FLAGS)
    values = {**given, **fill.values}
    config = build(values)
    if "prm" in fill.filled:
        try:
            pull(recipe.prm)
        except ModelError as e:
            offline(e)
            values |= {f: getattr(PLAIN, f) for f in fill.filled}
            config = build(values)
    unused = () if config.grows_tree else fill.tree_flags
    return SearchChoice(recipe, config, values.get("prm"), unused)
