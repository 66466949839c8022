"""What the engine's parts count for a request during one call (the tree grower, the KV sequences,
the verification stage, the selector). They return these; the loop alone adds them to the request's
metrics, through `record`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field, fields, make_dataclass

from edgereason.engine.request import Request
from edgereason.engine.result import RequestMetrics

# The counters the parts count, by their RequestMetrics names: RequestMetrics alone declares each
# one's type and default (engine/result.py), and Counts is made from them; the rest of the metrics
# the loop and build_result set.
COUNTED = (
    "generated_tokens",
    "spec_tokens",
    "forward_rows",
    "dedup_saved_rows",
    "spec_tokens_reused",
    "spec_tokens_wasted",
    "pruned_rank",
    "pruned_perfect",
    "lookahead_scores",
    "recomputed_tokens",
    "evictions",
    "prm_calls",
    "prm_requests",
    "prm_tokens",
    "prm_time_s",
)


# COUNTED, not dataclasses.fields(): fields() builds its tuple at each call, and these two run for
# every request at every engine step
def _iadd(self: Counts, other: Counts) -> Counts:
    for name in COUNTED:
        setattr(self, name, getattr(self, name) + getattr(other, name))
    return self


def _items(self: Counts) -> Iterator[tuple[str, int | float]]:
    """The counters that moved, by name."""
    return ((name, v) for name in COUNTED if (v := getattr(self, name)))


_METRICS = {f.name: f for f in fields(RequestMetrics)}
# a dataclass of the COUNTED fields, each typed and zeroed as RequestMetrics has it: Counts(),
# Counts(evictions=1)
Counts = make_dataclass(
    "Counts",
    [(name, _METRICS[name].type, field(default=_METRICS[name].default)) for name in COUNTED],
    namespace={
        "__doc__": "One request's counters, named as RequestMetrics names them (engine/result.py).",
        "__module__": __name__,
        "__iadd__": _iadd,
        "items": _items,
    },
)


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
