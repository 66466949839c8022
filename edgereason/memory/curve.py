"""A measured throughput curve: what the split is modelled on (generator decode against concurrent
sequences, PRM prefill against batch tokens) and what `--policy auto` reads its pass cost from.
Backends measure the points (their `profiled_generator` / `profiled_prm`); this is the arithmetic
over them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curve:
    """(x, tokens per second) points, x ascending: x = concurrent sequences or batch tokens."""

    points: tuple[tuple[int, float], ...]

    def at(self, x: float) -> float:
        """Linear interpolation; clamped to the end points outside the measured range."""
        xs, ys = zip(*self.points)
        return float(np.interp(x, xs, ys))

    def saturation(self, fraction: float = 0.9) -> int:
        """The smallest x whose throughput reaches `fraction` of the best measured."""
        best = max(y for _, y in self.points)
        return next(x for x, y in self.points if y >= fraction * best)

    def as_list(self) -> list[list[float]]:
        return [[x, round(y, 2)] for x, y in self.points]
