"""The `auto` policy (the default of solve and chat): `edge` where a wider forward pass is cheap
enough for speculation to pay, `baseline` elsewhere, decided by this device's pass cost.

Pass cost: the time of a decode pass of 8 rows over that of 1 row, read from the generator decode
curve of the memory profile; without a profile it is measured once at start-up (measure_decode, 1
and 8 rows, about a second) and cached in $EDGEREASON_HOME/pass-cost.json per device, generator,
threads, GPU layers and backend.

`auto:key=value...` and switch flags override the chosen preset as they would override it named
directly."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import cast

from edgereason import models
from edgereason.engine.policy import Policy, parse_policy
from edgereason.memory.curve import Curve
from edgereason.protocols import Points
from edgereason.util.cache_file import read_cache
from edgereason.util.files import write_text_atomic
from edgereason.util.schema import TEXT, Fields, MapOf, Number

AUTO = "auto"
# Speculation fills the slots a synchronous step leaves idle, so it pays only where those slots are
# nearly free. Edge's gain over baseline, interpolated in log(cost) between a GPU and a CPU measured
# with SmolLM2, breaks even near 3.0x; 2.5x keeps a margin (docs/engine.md; docs/results.md,
# "CPUs").
EDGE_MAX_COST_8 = 2.5
CACHE_FILE = "pass-cost.json"
MEASURE_ROWS = (1, 8)
MEASURE_STEPS = 4  # timed passes per point after a warm-up: the fastest counts


@dataclass(frozen=True)
class AutoChoice:
    preset: str  # "edge" or "baseline"
    cost_8: float  # a decode pass of 8 rows / a pass of 1 row
    source: str  # "memory profile", "measured at start-up", "cached measurement"

    def note(self) -> str:
        return (
            f"edgereason: --policy auto chose {self.preset}: a forward pass of 8 rows costs "
            f"{self.cost_8:.1f}x one row here ({self.source}); speculation pays below "
            f"{EDGE_MAX_COST_8}x"
        )

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "edge_max_cost_8": EDGE_MAX_COST_8}


def is_auto(policy: Policy) -> bool:
    return policy.name.split(":")[0] == AUTO


def choose(cost_8: float, source: str) -> AutoChoice:
    return AutoChoice("edge" if cost_8 < EDGE_MAX_COST_8 else "baseline", cost_8, source)


def resolve(policy: Policy, choice: AutoChoice) -> Policy:
    """The chosen preset with the overrides `auto` carried (its name holds them all: parse_policy
    and with_switches both record `:key=value`); the name stays as the user wrote it."""
    return replace(parse_policy(choice.preset + policy.name[len(AUTO) :]), name=policy.name)


def cost_8(curve: Curve) -> float:
    """Pass time at 8 rows over pass time at 1 row, from a tok/s curve by rows (time = rows /
    tok/s)."""
    return (8 / curve.at(8)) / (1 / curve.at(1))


def choice_for(
    profile: dict | None, cache_key: str, measure: Callable[[], Points] | None
) -> AutoChoice:
    """From the memory profile, else the cache (under `cache_key`: device, generator, threads, GPU
    layers, backend), else `measure` (the decode points at MEASURE_ROWS of this session's generator;
    None where its backend cannot measure one, a served generator), then cached."""
    if profile is not None:
        points = tuple((int(x), float(y)) for x, y in profile["curves"]["generator"])
        return choose(cost_8(Curve(points)), "memory profile")
    if measure is None:
        return choose(float("inf"), "no pass-cost measurement for this backend")
    key = cache_key
    cache = _read_cache()
    if key in cache:
        return choose(float(cache[key]["cost_8"]), "cached measurement")
    value = cost_8(Curve(measure()))
    cache[key] = {
        "cost_8": round(value, 3),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    _write_cache(cache)
    return choose(value, "measured at start-up")


# what a cached measurement holds, under its key (profile_choice.pass_cost_key)
_CACHE = MapOf(Fields({"cost_8": Number(above=0)}, {"created": TEXT}))


def _read_cache() -> dict:
    """The cached measurements; none where the file is missing, and none where it is damaged (said
    once, naming the file: the measurement this session makes writes it whole again)."""
    path = models.home() / CACHE_FILE
    return cast(dict, read_cache(path, _CACHE, "measuring the pass cost again") or {})


def _write_cache(cache: dict) -> None:
    path = models.home() / CACHE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(cache, indent=2))
    except OSError as e:  # an unwritable home only costs measuring again next time
        print(f"edgereason: could not cache the pass cost in {path} ({e})", file=sys.stderr)
