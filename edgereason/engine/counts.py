"""What the engine's parts count for a request during one call (the tree grower, the KV sequences,
the verification stage, the selector). They return these; the loop alone adds them to the request's
metrics, through `record`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from edgereason.engine.request import Request
from edgereason.engine.result import Counters


@dataclass
class Counts(Counters):
    """One request's counters in one call: the fields of Counters (engine/result.py), which
    RequestMetrics extends, so that each counter is declared once."""

    # these two run for every request at every engine step, mostly over zeros: they read the
    # instance's dict (its fields, nothing else) and skip the zeros (adding 0 changes nothing)
    def __iadd__(self, other: Counts) -> Counts:
        for name, value in other.items():
            setattr(self, name, getattr(self, name) + value)
        return self

    def items(self) -> Iterator[tuple[str, int | float]]:
        """The counters that moved, by name."""
        return ((name, v) for name, v in vars(self).items() if v)


class Tally:
    """Counts by request, for a call that touches several requests (a batch, a PRM call)."""

    def __init__(self) -> None:
        self._by: dict[int, tuple[Request, Counts]] = {}

    def of(self, req: Request) -> Counts:
        """The counts of `req`, made at its first use."""
        entry = self._by.get(id(req))
        if entry is None:  # not setdefault: that would build a Counts at every call
            entry = self._by[id(req)] = (req, Counts())
        return entry[1]

    def add(self, req: Request, counts: Counts) -> None:
        mine = self.of(req)
        mine += counts

    def __iter__(self) -> Iterator[tuple[Request, Counts]]:
        return iter(self._by.values())


def record(tally: Tally) -> None:
    """Add what the engine's parts counted to each request's metrics."""
    for req, counts in tally:
        record_one(req, counts)


def record_one(req: Request, counts: Counts) -> None:
    m = req.metrics
    for name, value in counts.items():
        setattr(m, name, getattr(m, name) + value)
