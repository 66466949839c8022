"""What a bench runs, once the CLI has read its flags: the settings of its sessions and --out
(BenchSettings), and the runs side by side (RunGrid) in the interleaved order they run in."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.evaluation.runner import RunSpec
from edgereason.session.settings import ModelSettings

Specs = list[tuple[str, RunSpec]]  # (KV split, run), in the order they run


@dataclass(frozen=True)
class BenchSettings:
    models: ModelSettings  # every split's session: these, with its split
    out: Path
    force: bool  # overwrite an earlier bench's results in out
    resume: bool  # continue an interrupted bench in out
    plots: bool
    dataset: str  # the problems' file as messages name it ("stdin" for -)


@dataclass(frozen=True)
class RunGrid:
    """The runs side by side: every policy, beam size, strategy, rate and KV split, repeated."""

    policies: list[Policy]
    beams: list[int]
    strategies: list[str]
    rates: list[float]
    splits: list[str]
    repeat: int
    seed: int  # repetition r's arrivals take seed + r
    concurrency: int
    search: SearchConfig  # every run's search, with the run's beams and strategy


def run_specs(grid: RunGrid) -> Specs:
    """Every run, each with its KV split, in the interleaved order they run in (splits alternate
    like policies, so machine drift hits all of them alike)."""
    return [
        (
            split,
            RunSpec(
                policy,
                replace(grid.search, beams=b, strategy=strategy),
                rate,
                rep,
                grid.seed + rep,
                grid.concurrency,
                label=_label(grid, policy, strategy, split),
            ),
        )
        for rep in range(grid.repeat)
        for rate in grid.rates
        for strategy in grid.strategies
        for b in grid.beams
        for policy in grid.policies
        for split in grid.splits
    ]


def _label(grid: RunGrid, policy: Policy, strategy: str, split: str) -> str:
    """The policy's name; with several strategies or splits it names them too, so tables, plots and
    --compare keep runs apart."""
    label = policy.name
    if len(grid.strategies) > 1:
        label += f"/{strategy}"
    if len(grid.splits) > 1:
        label += f"@{split}"
    return label
