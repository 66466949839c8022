"""Engine policies: one switch per technique (design.md section 4), presets registered by name.

A policy string is `PRESET[:key=value[:key=value...]]`, e.g. `edge:order=fifo` or
`specscale:lazy_verify=false`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Literal

from edgereason.errors import ConfigError

Order = Literal["prefix", "fifo"]

# queued PRM tokens that trigger a lazy flush where no memory profile says (design.md section 4)
DEFAULT_LV_THRESHOLD = {"cpu": 512, "gpu": 2048}


@dataclass(frozen=True)
class Policy:
    """Which techniques the engine applies. All off is the synchronous baseline."""

    name: str = "baseline"
    # FastTTS: a candidate that finished its step keeps decoding into its next step in idle batch
    # slots.
    speculative_extension: bool = False
    # FastTTS: a complete speculative step is scored together with the current one in one PRM
    # request.
    lookahead: bool = False
    # Share of the speculative tokens the non-first children of a selected candidate keep (so they
    # diverge).
    spec_reuse_fraction: float = 0.85
    # Speculative rows a request may run in a pass: this many times its beams, less its standard
    # rows. 1 fills only the slots stragglers leave idle; more pays where a pass of more rows costs
    # little more (a GPU).
    spec_slots: float = 1.0
    # SpecScale: verify and expand a candidate as soon as its step ends; select when its sibling set
    # is complete.
    async_expand: bool = False
    # SpecScale early pruning: rank rule and perfect-score rule.
    early_prune_rank: bool = False
    early_prune_perfect: bool = False
    perfect_score: float = 0.999
    # SpecScale computation deduplication: nodes carry a potential, one forward pass per distinct
    # prefix.
    dedup: bool = False
    # SpecScale lazy verification: queue PRM requests and flush them in large batches.
    lazy_verify: bool = False
    # 0: the session's (its memory profile's, else DEFAULT_LV_THRESHOLD of its device); an engine
    # built without a session takes the CPU's
    lv_threshold: int = 0
    lv_max_defer: int = 6
    # FastTTS prefix-aware scheduling: run sequences sharing a prefix together when KV is short.
    order: Order = "prefix"

    def __post_init__(self) -> None:
        # errors name the flag and the policy switch (`--policies edge:spec_slots=2`) alike
        if not 0.0 <= self.spec_reuse_fraction <= 1.0:
            raise ConfigError(
                "--spec-reuse-fraction (spec_reuse_fraction) must be in [0, 1], got "
                f"{self.spec_reuse_fraction}"
            )
        if not math.isfinite(self.spec_slots) or self.spec_slots < 0:
            raise ConfigError(
                f"--spec-slots (spec_slots) must be a finite number >= 0, got {self.spec_slots}"
            )
        if not 0.0 < self.perfect_score <= 1.0:
            raise ConfigError(
                f"--perfect-score (perfect_score) must be in (0, 1], got {self.perfect_score}"
            )
        if self.lv_threshold < 0 or self.lv_max_defer < 0:
            raise ConfigError(
                "--lv-threshold and --lv-max-defer (lv_threshold, lv_max_defer) must be >= 0"
            )
        if self.order not in ("prefix", "fifo"):
            raise ConfigError(f"--order (order) must be prefix or fifo, got {self.order!r}")
        if self.lookahead and not self.speculative_extension:
            raise ConfigError("lookahead verification needs speculative_extension")

    def switches(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k != "name"}


# One line of --help per switch (every Policy field but name), and the placeholder of each valued
# one.
SWITCH_HELP: dict[str, str] = {
    "speculative_extension": "FastTTS: a candidate that finished its step keeps decoding in idle "
    "batch slots",
    "lookahead": "FastTTS: score a finished speculative step with the current one (needs "
    "speculative extension)",
    "spec_reuse_fraction": "share of the speculative tokens a selected candidate's other children "
    "keep (0-1)",
    "spec_slots": "speculative rows a request may run in a pass, as a multiple of its beams less "
    "its standard rows",
    "async_expand": "SpecScale: verify and expand a candidate as soon as its step ends",
    "early_prune_rank": "SpecScale: prune a verified candidate that can no longer rank among the "
    "kept ones",
    "early_prune_perfect": "SpecScale: select at once when enough candidates reach --perfect-score",
    "perfect_score": "score that counts as perfect for --early-prune-perfect (0-1]",
    "dedup": "SpecScale: one forward pass per distinct prefix, candidates carried as potentials",
    "lazy_verify": "SpecScale: queue PRM requests and score them in large batches",
    "lv_threshold": "queued PRM tokens that trigger a lazy flush (0: from the memory profile)",
    "lv_max_defer": "times a queued PRM request may be deferred before a lazy flush",
    "order": "scheduling order when KV memory is short",
}
SWITCH_METAVAR: dict[str, str] = {
    "spec_reuse_fraction": "FRACTION",
    "spec_slots": "FACTOR",
    "perfect_score": "SCORE",
    "lv_threshold": "TOKENS",
    "lv_max_defer": "N",
}


PRESETS: dict[str, Policy] = {
    "baseline": Policy(name="baseline"),
    "naive-spec": Policy(name="naive-spec", async_expand=True),
    "fasttts": Policy(name="fasttts", speculative_extension=True, lookahead=True),
    "specscale": Policy(
        name="specscale",
        async_expand=True,
        early_prune_rank=True,
        early_prune_perfect=True,
        dedup=True,
        lazy_verify=True,
    ),
    "edge": Policy(
        name="edge",
        speculative_extension=True,
        lookahead=True,
        early_prune_rank=True,
        early_prune_perfect=True,
        dedup=True,
        lazy_verify=True,
    ),
    # a placeholder: the session resolves it to edge or baseline by this device's pass cost
    # (session/auto_policy.py)
    "auto": Policy(name="auto"),
}


def _coerce(field_type: object, raw: str, key: str) -> object:
    kind = str(field_type)
    if "bool" in kind:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"policy switch {key} takes true/false, got {raw!r}")
    try:
        if "float" in kind:
            return float(raw)
        if "int" in kind:
            return int(raw)
    except ValueError:
        raise ConfigError(f"policy switch {key} takes a number, got {raw!r}") from None
    return raw


SWITCHES: tuple[str, ...] = tuple(f.name for f in fields(Policy) if f.name != "name")


def with_switches(policy: Policy, changes: dict[str, object]) -> Policy:
    """The policy with some switches overridden (by CLI flags); the name records the overrides."""
    if not changes:
        return policy
    suffix = "".join(
        f":{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in changes.items()
    )
    return replace(policy, name=policy.name + suffix, **changes)


def parse_policy(spec: str) -> Policy:
    """`edge:order=fifo` -> the `edge` preset with `order` overridden. The name keeps the
    overrides."""
    preset, *overrides = spec.strip().split(":")
    if preset not in PRESETS:
        raise ConfigError(f"unknown policy {preset!r}; presets: {', '.join(PRESETS)}")
    known = {f.name: f.type for f in fields(Policy) if f.name != "name"}
    changes: dict[str, object] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise ConfigError(
                f"bad policy override {item!r}; use key=value with a key among: {', '.join(known)}"
            )
        changes[key] = _coerce(known[key], raw.strip(), key)
    return replace(PRESETS[preset], name=spec.strip(), **changes)
